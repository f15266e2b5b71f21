"""OCI images of the embedded engines, built on this machine from the locked jars: no registry needed.

An air-gapped machine (or CI) gets a container of exactly the engine the suite tests: the jars pinned by
engine/launcher/<engine>/jars.lock (fetched as `esmem engine up` fetches them) and the compiled launcher,
on a base image with a Java runtime. The base is either given (any image with Java 21+ and useradd) or
made here without a registry: a debootstrap "minbase" of a Debian suite with OpenJDK 21 (both engines
run on it; OpenSearch 3 needs 21+), imported as an image. The build files are engine/container/ (a
Containerfile and the entrypoint); whichever of docker and podman answers builds them.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from esmem.engines import embedded, lockfile
from esmem.errors import EngineUnavailable, EsmemError

RUNTIMES = ("docker", "podman")
DEFAULT_SUITE = "trixie"  # Debian 13: the first stable suite with openjdk-21-jre-headless
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("openjdk-21-jre-headless", "curl")  # curl: the health checks of docker-compose.yml
NODE_HOME = "/var/lib/esmem"  # the node's home inside the image (engine/container/Containerfile)


def build_files() -> Path:
    """engine/container: the Containerfile and the entrypoint."""
    return embedded.engine_dir() / "container"


def runtime(prefer: str | None = None) -> str:
    """`prefer`, else the first of docker and podman whose daemon (or service) answers `info`. Docker
    first: testcontainers and compose talk to the Docker API, so an image must be where it looks (a podman
    service behind DOCKER_HOST shares podman's storage either way)."""
    tried = []
    for cli in ([prefer] if prefer else RUNTIMES):
        path = shutil.which(cli)
        if not path:
            tried.append(f"{cli}: not installed")
            continue
        try:
            proc = subprocess.run([path, "info"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            tried.append(f"{cli}: {e}")
            continue
        if proc.returncode == 0:
            return path
        tried.append(f"{cli}: {(proc.stderr.strip().splitlines() or ['no answer'])[-1]}")
    raise EngineUnavailable("no container runtime answers: " + "; ".join(tried))


def _run(cmd: list[str], what: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise EsmemError(f"{what} failed ({' '.join(cmd[:3])} ...):\n{tail}")
    return proc


def image_exists(cli: str, image: str) -> bool:
    return subprocess.run([cli, "image", "inspect", image], capture_output=True).returncode == 0


def debian_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this machine's apt uses (sources.list or deb822 .sources), else deb.debian.org."""
    files = [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*.list")),
             *sorted((sources / "sources.list.d").glob("*.sources"))]
    for path in files:
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            words = line.split("#", 1)[0].split()
            if words[:1] == ["URIs:"]:  # deb822
                uris = words[1:]
            elif words[:1] == ["deb"]:  # one line: deb [options] URI suite components
                uris = [w for w in words[1:] if "://" in w][:1]
            else:
                continue
            for uri in uris:
                if uri.rstrip("/").endswith("/debian"):
                    return uri.rstrip("/")
    return DEFAULT_MIRROR


def base_image(cli: str, suite: str = DEFAULT_SUITE, mirror: str | None = None, *, work: Path) -> str:
    """`esmem-base:<suite>` (made once): debootstrap --variant=minbase of `suite` with OpenJDK 21,
    without apt's caches, imported into the runtime. Needs root and debootstrap."""
    name = f"esmem-base:{suite}"
    if image_exists(cli, name):
        return name
    if not shutil.which("debootstrap") or os.geteuid() != 0:
        raise EsmemError("making the base image needs debootstrap, as root (apt-get install debootstrap); "
                         "or pass --base IMAGE: any image with Java 21+ as `java` and useradd")
    rootfs = Path(tempfile.mkdtemp(prefix="rootfs-", dir=work))
    try:
        _run(["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", suite, str(rootfs),
              mirror or debian_mirror()], f"debootstrap of Debian {suite}")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "--exclude=./var/cache/apt/*",
                                "--exclude=./var/lib/apt/lists/*", "-c", "."], stdout=subprocess.PIPE)
        try:
            _run([cli, "import", "-", name], f"importing the base image {name}", stdin=tar.stdout)
        finally:
            tar.stdout.close()  # type: ignore[union-attr]  # stdout=PIPE: a pipe, never None
            tar.wait()
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    return name


def engine_version(engine: str) -> str:
    """The OpenSearch version the lock pins (org.opensearch:opensearch)."""
    for jar in lockfile.read_lock(embedded.engine_dir(), embedded.flavour(engine).name):
        if (jar.group, jar.artifact) == ("org.opensearch", "opensearch"):
            return jar.version
    raise EsmemError(f"engine/launcher/{engine}/jars.lock pins no org.opensearch:opensearch")


def default_tag(engine: str, *, secure: bool = False) -> str:
    return f"esmem/{embedded.flavour(engine).name}:{engine_version(engine)}{'-secure' if secure else ''}"


@dataclass(frozen=True)
class Image:
    """A built engine image: its name, the runtime that holds it, and for a secured image the
    directory with the CA to trust and the admin password file (never inside the image)."""

    name: str
    runtime: str
    base: str
    secrets: Path | None = None


def write_context(engine: str, secure: bool, ctx: Path, secrets_home: Path) -> None:
    """The build context: launcher classes, jars (numbered in classpath order), engine.args, entrypoint,
    and node/ (the node's home: empty, or the secured node's configuration)."""
    entries, plugins = embedded.node_classpath(engine, secure=secure)
    shutil.copy2(build_files() / "Containerfile", ctx / "Containerfile")
    shutil.copy2(build_files() / "entrypoint.sh", ctx / "entrypoint.sh")
    (ctx / "lib").mkdir()
    (ctx / "node").mkdir()
    inside = []
    for i, entry in enumerate(map(Path, entries)):
        if entry.is_dir():  # the launcher's classes (the only directory on the classpath)
            shutil.copytree(entry, ctx / "classes")
            inside.append("/opt/esmem/classes")
        else:
            shutil.copy2(entry, ctx / "lib" / f"{i:03d}-{entry.name}")
            inside.append(f"/opt/esmem/lib/{i:03d}-{entry.name}")
    args = [f"-cp {':'.join(inside)}", "-Dlog4j2.disable.jmx=true"]
    if plugins:
        args.append(f"-Desmem.plugins={','.join(plugins)}")
    if secure:
        args.append(f"-Dlog4j2.configurationFile={NODE_HOME}/config/log4j2-esmem-secure.properties")
        _secure_node(ctx / "node", secrets_home)
    (ctx / "engine.args").write_text("\n".join(args) + "\n")


def _secure_node(node: Path, secrets_home: Path) -> None:
    """The secured node's configuration, written as `esmem engine up --secure` writes it, then moved to
    the image's paths: the node's certificate and key and the CA certificate go in; the CA key, the
    admin client key and the admin password stay in `secrets_home` on this machine."""
    from esmem.engines import embedded_secure

    target = embedded.build(embedded.DEFAULT_FLAVOUR, secure=True)
    sec = embedded_secure.configure(secrets_home, node, target)
    (node / "secure").mkdir()
    for name in ("node.pem", "node-key.pem", "ca.pem"):
        shutil.copy2(sec.dir / name, node / "secure" / name)
    yml = node / "config" / "opensearch.yml"
    yml.write_text(yml.read_text().replace(str(sec.dir), f"{NODE_HOME}/secure"))
    for path in node.rglob("*"):  # the node runs as uid 1000: its copies must be readable by it
        path.chmod(0o700 if path.is_dir() else 0o600)


def build(engine: str | None = None, *, secure: bool = False, base: str | None = None, tag: str | None = None,
          suite: str = DEFAULT_SUITE, mirror: str | None = None, cli: str | None = None) -> Image:
    """Build the image of one embedded engine (the base first, when none is given and none was made)
    with `cli` (docker or podman; by default whichever answers)."""
    fl = embedded.flavour(engine)
    if secure and fl.name != embedded.DEFAULT_FLAVOUR:
        raise EsmemError("the secured embedded engine is one OpenSearch 2.19 node (security plugin 2.19.4.0)")
    cli = runtime(cli)
    name = tag or default_tag(fl.name, secure=secure)
    work = embedded.home_dir() / "images"
    work.mkdir(parents=True, exist_ok=True)
    base = base or base_image(cli, suite, mirror, work=work)
    secrets_home = work / name.replace("/", "_").replace(":", "_")
    with tempfile.TemporaryDirectory(prefix="context-", dir=work) as tmp:
        ctx = Path(tmp)
        write_context(fl.name, secure, ctx, secrets_home)
        # podman would look for a short-named base in registries first; docker uses a local image as it is
        pull = ["--pull=never"] if Path(cli).name == "podman" else []
        _run([cli, "build", *pull, "--build-arg", f"BASE={base}", "--build-arg", f"ENGINE={fl.name}",
              "--build-arg", f"VERSION={engine_version(fl.name)}", "-t", name, "-f", str(ctx / "Containerfile"),
              str(ctx)], f"building {name}")
    return Image(name, cli, base, secrets_home / "secure" if secure else None)
