"""``rocketlite start`` sizes a new store for a laptop and keeps an existing store's sizes; keys
in broker.conf always win (RocketMQ's sizes one key away)."""

from __future__ import annotations

from pathlib import Path

from rocketlite.cli.server_commands import START_DEFAULTS, load_configs
from rocketlite.store.config import StoreConfig
from rocketlite.store.index_file import IndexFile


def sizes(cfg: StoreConfig) -> tuple[int, int, int]:
    return cfg.mapped_file_size_commit_log, cfg.max_hash_slot_num, cfg.max_index_num


def test_a_new_store_gets_laptop_sizes(tmp_path: Path) -> None:
    _, cfg = load_configs(None, {"storePathRootDir": str(tmp_path / "s")}, START_DEFAULTS)
    assert sizes(cfg) == (64 << 20, 500_000, 2_000_000)
    _, plain = load_configs(None, {"storePathRootDir": str(tmp_path / "s")})  # rocketlite broker
    assert sizes(plain) == (1 << 30, 5_000_000, 20_000_000)


def test_broker_conf_keys_win(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=1073741824\nmaxHashSlotNum=5000000\n"
                    "maxIndexNum=20000000\n", encoding="utf-8")
    _, cfg = load_configs(conf, {"storePathRootDir": str(tmp_path / "s")}, START_DEFAULTS)
    assert sizes(cfg) == (1 << 30, 5_000_000, 20_000_000)


def test_an_existing_store_keeps_its_sizes(tmp_path: Path) -> None:
    """A store created with RocketMQ's sizes before: its segments would not load with 64 MiB,
    and index files of another geometry would be dropped."""
    root = tmp_path / "s"
    (root / "commitlog").mkdir(parents=True)
    (root / "index").mkdir()
    with (root / "commitlog" / f"{0:020d}").open("wb") as f:
        f.truncate(1 << 30)
    IndexFile(root / "index" / "20240101000000000", 1000, 4000, create=True).close()
    _, cfg = load_configs(None, {"storePathRootDir": str(root)}, START_DEFAULTS)
    assert sizes(cfg) == (1 << 30, 1000, 4000)


def test_an_existing_index_of_another_ratio_keeps_its_geometry(tmp_path: Path) -> None:
    """Not RocketMQ's 4 entries per slot: the geometry is read from the file's entries
    (``store_reader.index_slot_num``), not guessed into the start defaults (which would drop the
    file and its keys)."""
    root = tmp_path / "s"
    (root / "index").mkdir(parents=True)
    f = IndexFile(root / "index" / "20240101000000000", 1000, 2500, create=True)
    for n in range(1, 11):
        assert f.put(f"T#k{n}", n * 100, 1_700_000_000_000)
    f.flush()
    f.close()
    _, cfg = load_configs(None, {"storePathRootDir": str(root)}, START_DEFAULTS)
    assert (cfg.max_hash_slot_num, cfg.max_index_num) == (1000, 2500)
