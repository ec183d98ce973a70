import os

from orchestrator.results import atomic


def test_atomic_files_get_ordinary_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        atomic.write_json(tmp_path / "x.json", {"a": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "x.json").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]
