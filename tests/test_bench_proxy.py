"""`make bench`'s proxy rows (bench/proxy_rows.py): the figures they report, the rendered config they run, and
one tiny run end to end. No timing here: speed is measured only by `make bench`."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import proxy_rows, run
from bench.proxy_rows import ProxyRow, Run
from tests.support.flower import HTTP_ERA
from tests.support.manifests import get
from tests.test_hub_exposure import hub, render


def _transfer(push_s: float, pull_s: float, cpu: float) -> Run:
    figures = {"push_s": push_s, "pull_s": pull_s, "push_bytes": 10**9, "pull_bytes": 10**9}
    return Run(figures, {"push": cpu, "pull": cpu / 2})


def _beats(direct: list[float], proxy: list[float]) -> Run:
    return Run({"direct": direct, "proxy": proxy}, {"heartbeat": 0.001 * len(proxy)})


def test_the_table_reports_each_paths_medians_and_what_the_proxy_adds() -> None:
    row = ProxyRow("proxy-1gb", 200, 5 * 1024**2, 2)
    row.transfers["direct"] = [_transfer(2.0, 1.0, 0.0), _transfer(4.0, 2.0, 0.0)]
    row.transfers["proxy"] = [_transfer(4.0, 2.0, 3.0), _transfer(8.0, 4.0, 5.0)]
    row.beats = [_beats([0.001, 0.002], [0.002, 0.004]), _beats([0.001, 0.003], [0.002, 0.006])]
    lines = proxy_rows.table([row], 2).splitlines()
    # 1 GB in 2 s and 4 s: the median of 500 and 250 MB/s; nginx's CPU per GB the median of 3 and 5 s.
    assert lines[2].startswith("| 200 x 5 MiB | direct | 375 | 750 | 0.00 | 0.00 | 1.50 |")
    assert lines[3].startswith("| 200 x 5 MiB | proxy | 188 | 375 | 4.00 | 2.00 | 3.00 |")
    assert lines[3].endswith("| 1000 |")  # 1 ms of nginx CPU a proxied heartbeat
    assert lines[4].startswith("| 200 x 5 MiB | proxy / direct | 0.50x | 0.50x | | | +1.50 |")


def test_a_rendered_line_the_bench_moves_but_cannot_find_fails_loudly(tmp_path: Path) -> None:
    objects, _, _ = render(hub(HTTP_ERA))  # the bench's stack (its TLS from the mock provider: config only)
    conf = get(objects, "ConfigMap", "fl-superlink-fleet-proxy")["data"]["nginx.conf"]
    moved = proxy_rows.relocated(conf, tmp_path, 1234, 5678)
    assert "listen 127.0.0.1:1234 ssl;" in moved and "server 127.0.0.1:5678;" in moved
    assert f"pid {tmp_path}/nginx.pid;" in moved and "/etc/flower/" not in moved
    # Negative control: a config whose listen line changed is refused, not run half-moved.
    with pytest.raises(SystemExit, match="has no 'listen 8000 ssl;'"):
        proxy_rows.relocated(conf.replace("listen 8000 ssl;", "listen 8443 ssl;"), tmp_path, 1234, 5678)


@pytest.mark.live
def test_a_proxy_row_runs_end_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two 64 KiB objects each way and five heartbeats a path, through Debian's nginx and direct. The client
    itself checks every pulled byte against what it pushed. Through the proxy nginx logs every request;
    direct (the negative control: the same client, the same upstream) it logs none and spends no CPU."""
    if (why := proxy_rows.missing()) is not None:
        pytest.fail(why)
    monkeypatch.setattr(proxy_rows, "ROWS", {"proxy-tiny": (2, 64 * 1024, 5)})
    logged: dict[str, int] = {}
    original = proxy_rows.Bench.transfer

    def counted(self: proxy_rows.Bench, path: str, objects: int, size: int) -> Run:
        before = _lines(self.tmp / "access.log")
        result = original(self, path, objects, size)
        logged[path] = _lines(self.tmp / "access.log") - before
        return result

    monkeypatch.setattr(proxy_rows.Bench, "transfer", counted)
    (row,) = proxy_rows.run(["proxy-tiny"], 1)
    # A warm-up heartbeat, 2 pushes and 2 pulls, each a line of the proxy's access log.
    assert logged == {"direct": 0, "proxy": 5}
    (proxy,), (direct,), (beats,) = row.transfers["proxy"], row.transfers["direct"], row.beats
    assert proxy.figures["push_bytes"] > 2 * 64 * 1024 and proxy.figures["pull_bytes"] == 2 * 64 * 1024
    # nginx's CPU is read in clock ticks (10 ms): a tiny proxied transfer may spend less than one, a direct one none.
    assert direct.nginx_cpu == {"push": 0, "pull": 0} and set(proxy.nginx_cpu) == {"push", "pull"}
    assert len(beats.figures["direct"]) == len(beats.figures["proxy"]) == 5
    assert "| 2 x 0.0625 MiB | proxy / direct |" in proxy_rows.table([row], 1)


def _lines(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_missing_nginx_is_named_before_any_row_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def never(*args: object) -> None:
        raise AssertionError("a row ran")

    monkeypatch.setattr(proxy_rows, "nginx", lambda: None)
    monkeypatch.setattr(run, "prepare", never)
    monkeypatch.setattr(proxy_rows, "run", never)
    with pytest.raises(SystemExit) as exit_:
        run.main(["--rows", "dev,proxy-100mb"])
    assert exit_.value.code == 2 and "nginx missing: the proxy rows run Debian's nginx" in capsys.readouterr().err
