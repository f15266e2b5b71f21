"""Plugin zips on the embedded engine's classpath: unpacked once, only new jars, the plugin class."""
from __future__ import annotations

import zipfile

import pytest

from esmem.engines import embedded, lockfile
from esmem.engines.plugins import expand, unpack


def _zip(path, names):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("plugin-descriptor.properties", "# comment\nname=demo\nclassname=org.example.DemoPlugin\n")
        for n in names:
            z.writestr(n, b"jar bytes of " + n.encode())
    return path


def test_expand_adds_the_new_jars_and_the_plugin_class(tmp_path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    node_guava = lib / "guava-33.0.0-jre.jar"
    node_guava.write_bytes(b"node's guava")
    z = _zip(lib / "demo-plugin-1.0.zip", ["demo-plugin-1.0.jar", "guava-32.1.3-jre.jar", "oshi-core-6.4.13.jar"])
    paths, classes = expand([tmp_path / "classes", node_guava, z], tmp_path / "cache")
    assert classes == ["org.example.DemoPlugin"]
    names = [p.name for p in paths]
    assert names[:2] == ["classes", "guava-33.0.0-jre.jar"]  # the node's own jars first, its guava wins
    assert sorted(names[2:]) == ["demo-plugin-1.0.jar", "oshi-core-6.4.13.jar"]
    again, _ = expand([tmp_path / "classes", node_guava, z], tmp_path / "cache")
    assert again == paths  # unpacked once


def test_a_zip_without_descriptor_or_with_paths_is_refused(tmp_path) -> None:
    bad = tmp_path / "x-1.0.zip"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("../evil.jar", b"x")
    with pytest.raises(ValueError, match="plugin-descriptor"):
        unpack(bad, tmp_path / "cache")
    assert not (tmp_path / "evil.jar").exists()


@pytest.mark.parametrize("name", list(embedded.FLAVOURS))
def test_every_engine_lock_carries_the_knn_plugin_zip(name) -> None:
    jars = lockfile.read_lock(embedded.engine_dir(), name)
    knn = [j for j in jars if j.artifact == "opensearch-knn"]
    assert len(knn) == 1 and knn[0].type == "zip" and knn[0].file_name.endswith(".zip")
    assert knn[0].version == {"opensearch-2": "2.19.1.0", "opensearch-3": "3.5.0.0"}[name]
    assert knn[0].line().split()[0].endswith("@zip")
