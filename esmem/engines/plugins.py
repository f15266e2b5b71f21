"""Plugin zips on the embedded engine's classpath (the k-NN plugin for the optional semantic leg).

OpenSearch serves plugins on Maven Central as `zip` artifacts: plugin-descriptor.properties (the
plugin class) plus the plugin's jar and the jars it needs. The embedded node has no plugin installer,
so a zip that engine/pom.xml depends on is unpacked once next to the jars, its jars join the classpath
(except those the node already has, by artifact name: the node's versions win) and its plugin class
is passed to the launcher (-Desmem.plugins), which adds it to the node's plugin list.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import zipfile
from pathlib import Path

JAR_VERSION = re.compile(r"^(?P<name>.+?)-\d[\w.\-]*\.jar$")  # as embedded_secure: artifact-version[-qualifier].jar


def _descriptor(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def unpack(zip_path: Path, cache: Path) -> Path:
    """The zip's contents under `cache`/<zip name>-<digest prefix>/ (unpacked once, atomically)."""
    digest = hashlib.sha256(zip_path.read_bytes()).hexdigest()[:16]
    dest = cache / f"{zip_path.stem}-{digest}"
    if (dest / "plugin-descriptor.properties").exists():
        return dest
    tmp = dest.with_name(dest.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(zip_path) as z:
        for info in z.infolist():  # flat zips: only plain names, nothing may leave the directory
            name = Path(info.filename).name
            if info.is_dir() or not name or name != info.filename:
                continue
            tmp.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_bytes(z.read(info))
    if not (tmp / "plugin-descriptor.properties").exists():
        shutil.rmtree(tmp, ignore_errors=True)
        raise ValueError(f"{zip_path} is not an OpenSearch plugin zip (no plugin-descriptor.properties)")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.replace(dest)
    return dest


def expand(entries: list[Path], cache: Path) -> tuple[list[Path], list[str]]:
    """Classpath entries with every plugin zip replaced by its new jars; plus the plugin classes."""
    plain = [p for p in entries if p.suffix != ".zip"]
    have = {m.group("name") for p in plain if (m := JAR_VERSION.match(p.name))}
    jars: list[Path] = []
    classes: list[str] = []
    for z in (p for p in entries if p.suffix == ".zip"):
        d = unpack(z, cache)
        classes.append(_descriptor((d / "plugin-descriptor.properties").read_text())["classname"])
        for jar in sorted(d.glob("*.jar")):
            m = JAR_VERSION.match(jar.name)
            if not m or m.group("name") not in have:
                jars.append(jar)
    return plain + jars, classes
