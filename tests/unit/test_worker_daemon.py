"""The preloading worker daemon's zip importers keep the directory of an archive that has not changed."""

import os
import zipfile
import zipimport

from runtime.executor import worker_daemon


def _archive(path, names):
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(name, "VALUE = 1\n")


def test_an_unchanged_archive_is_not_read_again_and_a_changed_one_is(tmp_path, monkeypatch):
    # the daemon patches the class for good; here it is restored after the test
    monkeypatch.setattr(zipimport.zipimporter, "invalidate_caches", zipimport.zipimporter.invalidate_caches)
    path = str(tmp_path / "lib.zip")
    _archive(path, ["first.py"])
    importer = zipimport.zipimporter(path)
    worker_daemon._keep_unchanged_zip_directories()

    reads = []
    original = zipimport._read_directory
    monkeypatch.setattr(zipimport, "_read_directory", lambda archive: reads.append(archive) or original(archive))
    importer.invalidate_caches()
    assert reads == [], "the directory read when the archive was opened still holds"

    _archive(path, ["first.py", "second.py"])
    os.utime(path, ns=(1, 1))  # a different modification time whatever the clock's resolution
    importer.invalidate_caches()
    assert reads == [path] and importer.find_spec("second") is not None
