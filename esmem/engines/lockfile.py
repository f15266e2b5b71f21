"""The embedded engine without Maven: pinned jars from Maven Central and a launcher compiled once.

`engine/launcher/<engine>/` holds what `esmem engine lock` wrote from a Maven build: `jars.lock`
(coordinates and SHA-256 of every runtime jar), `classes/` (the compiled launcher, a few KB) and
`source.sha256` (the digest of engine/pom.xml + engine/src it was made from). When that digest
still matches the sources, `esmem engine up` needs no Maven and no JDK compiler: it downloads the
jars once into ESMEM_HOME/jars (checked against the lock, with a progress bar) and runs the
launcher on any Java runtime of the right version (a JRE is enough).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import ssl
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from esmem.errors import EngineUnavailable, EsmemError

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"


@dataclass(frozen=True)
class Jar:
    group: str
    artifact: str
    version: str
    classifier: str
    sha256: str
    type: str = "jar"  # "zip": a plugin zip (esmem.engine_plugins unpacks it)

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}{'-' + self.classifier if self.classifier else ''}.{self.type}"

    @property
    def path(self) -> str:
        """Where Maven keeps it, below the repository root (the same layout locally and remotely)."""
        return f"{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"

    def line(self) -> str:
        coords = f"{self.group}:{self.artifact}:{self.version}" + (f":{self.classifier}" if self.classifier else "")
        return f"{coords}{'' if self.type == 'jar' else '@' + self.type} {self.sha256}"


def launcher_dir(project: Path, engine: str) -> Path:
    return project / "launcher" / engine


def read_lock(project: Path, engine: str) -> list[Jar]:
    return parse_lock((launcher_dir(project, engine) / "jars.lock").read_text())


def parse_lock(text: str) -> list[Jar]:
    """The jars of a lock's text: one `group:artifact:version[:classifier][@type] sha256` a line."""
    jars = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            coords, sha = line.split()
            coords, _, kind = coords.partition("@")
            g, a, v, *c = coords.split(":")
            jars.append(Jar(g, a, v, c[0] if c else "", sha, kind or "jar"))
    return jars


def is_current(project: Path, engine: str, digest: str) -> bool:
    """True when the committed launcher and lock were made from exactly these sources."""
    stamp = launcher_dir(project, engine) / "source.sha256"
    return stamp.exists() and stamp.read_text().strip() == digest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write(project: Path, engine: str, profile: str | None, target: Path, digest: str, mvn: str,
          env: dict[str, str]) -> Path:
    """After a Maven build of `engine`: record its runtime jars and copy its compiled launcher."""
    out = launcher_dir(project, engine)
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "deps.txt"
        cmd = [mvn, "-B", "-q", "dependency:list", "-DincludeScope=runtime", "-DoutputAbsoluteArtifactFilename=true",
               f"-DoutputFile={listing}"] + ([f"-P{profile}"] if profile else [])
        proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise EsmemError(f"mvn dependency:list failed for {engine}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        jars = []
        for line in listing.read_text().splitlines():
            parts = line.strip().split(" -- ")[0].split(":")
            if len(parts) not in (6, 7):
                continue
            g, a, kind, *rest = parts
            classifier, version = (rest[0], rest[1]) if len(parts) == 7 else ("", rest[0])
            jars.append(Jar(g, a, version, classifier, _sha256(Path(parts[-1])), kind))
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(target / "classes", out / "classes")  # the launcher and its log4j2.properties
    header = f"# {engine}: runtime jars of engine/pom.xml{' -P' + profile if profile else ''}, written by `esmem engine lock`\n"
    (out / "jars.lock").write_text(header + "".join(j.line() + "\n" for j in sorted(jars, key=lambda j: j.path)))
    (out / "source.sha256").write_text(digest + "\n")
    return out


def fetch(project: Path, engine: str, cache: Path) -> list[Path]:
    """Every jar (and plugin zip) of the lock in `cache` (downloaded once, checked against its SHA-256)."""
    return [launcher_dir(project, engine) / "classes", *fetch_jars(read_lock(project, engine), cache, engine)]


def fetch_jars(jars: list[Jar], cache: Path, label: str) -> list[Path]:
    """Each jar's path in `cache` (Maven's layout), downloaded from ESMEM_MAVEN_REPO (default Maven
    Central) when missing or not matching its SHA-256; `label` names them on the progress bar."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    paths = [cache / j.path for j in jars]
    missing = [(j, p) for j, p in zip(jars, paths) if not (p.exists() and _sha256(p) == j.sha256)]
    if missing:
        base = os.environ.get("ESMEM_MAVEN_REPO", MAVEN_CENTRAL).rstrip("/")
        with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                      transient=True) as progress:
            task = progress.add_task(f"{label}: {len(missing)} jars from {base}", total=None)
            # one TLS context for all downloads: loading the system's CA certificates took 40 ms of
            # CPU per jar, 3 s of a first start's 4 s; proxies from the environment still apply
            opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ssl.create_default_context()))
            for jar, path in missing:
                _download(opener, f"{base}/{jar.path}", path, jar.sha256, lambda n: progress.advance(task, n))
    return paths


def _download(opener: urllib.request.OpenerDirector, url: str, path: Path, sha256: str,
              advance: Callable[[int], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # a part file of its own: processes sharing one ESMEM_HOME (test workers, two first starts) may
    # fetch the same jar at once, and one must not rename or delete the other's part
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".part")
    part = Path(name)
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, opener.open(url, timeout=60) as resp:
            for block in iter(lambda: resp.read(1 << 16), b""):
                out.write(block)
                h.update(block)
                advance(len(block))
    except OSError as e:
        part.unlink(missing_ok=True)
        raise EngineUnavailable(f"downloading {url} failed: {e}") from None
    if h.hexdigest() != sha256:
        part.unlink(missing_ok=True)
        raise EsmemError(f"{url}: SHA-256 {h.hexdigest()} does not match the lock ({sha256}); nothing was kept")
    part.chmod(0o644)  # mkstemp makes it 0600: an engine image or another user reads the cache too
    part.replace(path)
