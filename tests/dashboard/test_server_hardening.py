"""The dashboard server under attack, for real: `kernelscope dashboard` on a free port, driven by
urllib, raw sockets and the `websockets` client speaking Streamlit's protocol
(tests/dashboard/server.py).

- a rebinding Host header (evil.example:PORT) is refused on HTTP and on the websocket, on a loopback
  bind and on an open one; a cross-origin websocket too;
- on an open bind with a token: no websocket session, no page and no upload without the access
  cookie — an upload announcing 150 MB is answered 401 before its body is sent; wrong tokens are
  rate-limited (429, the right one too);
- 20 hostile `.ncu-rep` uploads in a row: the server keeps answering, RSS within 200 MiB of where it
  started, no temporary folder left, only the intact reports stored;
- a 10 MB gzip bomb is refused, with the server's peak RSS below 1 GiB;
- hostile URL parameters on every page give "no such run / case / GPU …" and read nothing outside
  the store (inotify on a run-shaped canary folder next to it), and no page shows a stack trace: an
  internal error is an error id, whose traceback is in the server's log.
"""

from __future__ import annotations

import gzip
import re
import socket
import tempfile
import time
import zlib
from pathlib import Path

import pytest

from tests.conftest import H200_KERNELS, store_snapshot
from tests.dashboard import inotify
from tests.dashboard.helpers import make_store
from tests.dashboard.server import http, open_page, peak_rss, running_dashboard, upload_files

pytest.importorskip("websockets")
TOKEN = "kernelscope-test-token-7f3a"
MiB = 1 << 20


@pytest.fixture(scope="module")
def samples_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("srv") / "store"
    ids = make_store(root)
    return root, ids


def _refused_ws(srv, **kw) -> str:
    from websockets.exceptions import InvalidStatus

    with pytest.raises(InvalidStatus) as e:
        open_page(srv, "home", **kw)
    return str(e.value)


# ---------------------------------------------------------------------------------------------------


def test_rebinding_host_and_cross_origin_refused_on_a_loopback_bind(tmp_path, samples_store):
    root, _ = samples_store
    with running_dashboard(tmp_path, root, extra=["--allowed-host", "dash.lab.example"]) as srv:
        evil = f"evil.example:{srv.port}"
        status, body, _ = http(srv, "/", host=evil)
        assert status == 403 and b"Host not allowed" in body
        assert http(srv, "/_stcore/health", host=evil)[0] == 403
        assert http(srv, "/kernels", host=f"[::ffff:evil]:{srv.port}")[0] in (400, 403)
        _refused_ws(srv, host=evil, origin=f"http://{evil}")
        # right Host, another origin
        _refused_ws(srv, origin=f"http://{evil}")
        # this server's own names work: an IP literal, localhost, a name given with --allowed-host
        for good in (
            f"127.0.0.1:{srv.port}",
            f"localhost:{srv.port}",
            f"dash.lab.example:{srv.port}",
        ):
            assert http(srv, "/", host=good)[0] == 200, good
        page = open_page(
            srv, "home", host=f"localhost:{srv.port}", origin=f"http://localhost:{srv.port}"
        )
        assert page.finished and not page.exceptions
        assert srv.alive()


def test_open_bind_token_gates_websocket_page_and_upload_before_any_work(tmp_path, samples_store):
    root, _ = samples_store
    with running_dashboard(tmp_path, root, host="0.0.0.0", token=TOKEN) as srv:
        # rebinding refused on the open bind too
        assert http(srv, "/", host=f"evil.example:{srv.port}")[0] == 403
        # no session without the cookie
        assert "403" in _refused_ws(srv)
        # an upload announcing 150 MB is refused from its headers: the body is never sent, the
        # answer comes anyway
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(
                f"PUT /_stcore/upload_file/0123456789abcdef/f1 HTTP/1.1\r\nHost: "
                f"127.0.0.1:{srv.port}\r\n"
                "Content-Type: multipart/form-data; boundary=x\r\nContent-Length: "
                "150000000\r\n\r\n".encode()
            )
            t = time.monotonic()
            head = s.recv(4096).decode(errors="replace")
            assert head.startswith("HTTP/1.1 401") and time.monotonic() - t < 5, head
        # a page without the cookie is the login form, not the app
        status, body, _ = http(srv, "/kernels")
        assert status == 401 and b'name="token"' in body and b"streamlit" not in body.lower()
        # a correct token in the URL sets the cookie and leaves the address bar without it
        status, _, headers = http(srv, f"/kernels?token={TOKEN}&run=abcd")
        assert status == 303 and headers["location"] == "/kernels?run=abcd"
        cookie = headers["set-cookie"].split(";")[0]
        assert TOKEN not in cookie and "HttpOnly" in headers["set-cookie"]
        page = open_page(srv, "home", cookie=cookie)
        assert page.finished and page.session_id and not page.exceptions
        up = upload_files(
            srv,
            [("basic.ncu-rep.gz", (H200_KERNELS / "basic.ncu-rep.gz").read_bytes())],
            cookie=cookie,
        )
        assert any(kind == "success" for kind, _ in up.alerts), up.alerts
        # the login form: wrong tokens are rate-limited (5 per client per minute: then 429, slowly),
        # the right one is never refused (issue 42: wrong tokens from elsewhere locked everyone out)
        codes = [
            http(
                srv,
                "/_ks/login",
                method="POST",
                data=f"token=wrong{i}&next=/".encode(),
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )[0]
            for i in range(6)
        ]
        assert codes[:4] == [401] * 4 and codes[5] == 429, codes
        status, _, headers = http(srv, "/?token=wrong-again")
        assert status == 429 and int(headers["retry-after"]) > 0
        assert http(srv, f"/?token={TOKEN}")[0] == 303
        # not Streamlit's health check: the login, no app
        status, _, _ = http(srv, "/healthz")
        assert status == 401
        assert srv.alive()


def _hostile_reports() -> list[tuple[str, bytes]]:
    """20 broken .ncu-rep files: blocks deleted, duplicated, swapped (the kinds that made NVIDIA's
    reader abort), reports cut at a block boundary and inside a block, flipped payload bytes, random
    bytes behind the magic."""
    from tests.fuzz.mutate import _blocks

    out = []
    for name in ("basic", "full"):
        d = gzip.decompress((H200_KERNELS / f"{name}.ncu-rep.gz").read_bytes())
        bl, head = _blocks(d), d[:4]
        out += [
            (f"{name}_del13.ncu-rep", head + b"".join(bl[:13] + bl[14:])),
            (f"{name}_swap13.ncu-rep", head + b"".join(bl[:13] + [bl[14], bl[13]] + bl[15:])),
            (f"{name}_dup14.ncu-rep", head + b"".join(bl[:15] + [bl[14]] + bl[15:])),
            (f"{name}_cut5.ncu-rep", head + b"".join(bl[:6])),
            (f"{name}_cut_mid.ncu-rep", d[: len(d) // 2]),
            (f"{name}_pair_dup.ncu-rep", head + b"".join(bl[:17] + bl[15:17] + bl[17:])),
        ]
        flipped = bytearray(d)
        for i in range(200, len(d), len(d) // 40):
            flipped[i] ^= 0x5A
        out.append((f"{name}_flipped.ncu-rep", bytes(flipped)))
    import random

    rng = random.Random(17)
    out += [
        (f"random{i}.ncu-rep", b"NVR\x00" + bytes(rng.randrange(256) for _ in range(4096)))
        for i in range(6)
    ]
    return out[:20]


def test_twenty_hostile_ncu_rep_uploads_leave_the_server_answering_within_200_mib(
    tmp_path, samples_store
):
    pytest.importorskip("ncu_report")
    root, _ = samples_store
    store = tmp_path / "store"
    import shutil

    shutil.copytree(root, store)
    sandbox_dirs = lambda: {p.name for p in Path(tempfile.gettempdir()).glob("ks-sandbox-*")}
    before_dirs = sandbox_dirs()
    with running_dashboard(tmp_path, store) as srv:
        server_pid = srv.pid
        warm = upload_files(
            srv, [("basic.ncu-rep.gz", (H200_KERNELS / "basic.ncu-rep.gz").read_bytes())]
        )
        assert any(k == "success" for k, _ in warm.alerts)
        open_page(srv, "kernels")
        start = srv.rss()
        before = store_snapshot(store)
        files = _hostile_reports()
        assert len(files) == 20
        outcomes = []
        # one upload after the other, as 20 users would
        for name, data in files:
            page = upload_files(srv, [(name, data)])
            outcomes += page.alerts
            assert http(srv, "/_stcore/health")[0] == 200 and srv.alive()
        refused = [b for k, b in outcomes if k == "error"]
        stored = [b for k, b in outcomes if k == "success"]
        assert len(refused) + len(stored) == 20 and len(refused) >= 17, outcomes
        assert all(re.search(r"Nothing was stored\.$", b) for b in refused)
        after = srv.rss()
        assert after - start < 200 * MiB, f"RSS {start / MiB:.0f} -> {after / MiB:.0f} MiB"
        page = open_page(srv, "kernels")
        assert page.finished and not page.exceptions
    new = set(store_snapshot(store)) - set(before)
    assert all("/runs/" not in f"/{p}" or p.split("/")[1] in " ".join(stored) for p in new)
    # every temporary copy the server made is removed (folders are named by the reading process:
    # other processes on this machine may read reports meanwhile)
    assert not {d for d in sandbox_dirs() - before_dirs if f"-{server_pid}-" in d}


def test_a_10_mb_gzip_bomb_is_refused_with_peak_rss_below_1_gib(tmp_path):
    member = zlib.compressobj(9, zlib.DEFLATED, 31)
    # 1 GiB of zeros, about 1 MB compressed
    one = member.compress(b"\0" * (1 << 30)) + member.flush()
    # 10 gzip members: about 10 MB, 10 GiB inflated
    bomb = one * 10
    assert 9e6 < len(bomb) < 11e6
    with running_dashboard(tmp_path, tmp_path / "store") as srv:
        page = upload_files(srv, [("trace.json.gz", bomb)])
        errors = [b for k, b in page.alerts if k == "error"]
        assert errors and "decompresses to more than 200 MB" in errors[0], page.alerts
        assert peak_rss(srv.pid) < 1 << 30, f"peak RSS {peak_rss(srv.pid) / MiB:.0f} MiB"
        assert srv.alive() and not (tmp_path / "store" / "runs").exists()


# ---------------------------------------------------------------------------------------------------
# Hostile URL parameters


def _canary(tmp_path: Path, root: Path, run_id: str) -> Path:
    """A run-shaped folder outside the store: a copy of a real run under another id."""
    import shutil

    canary = tmp_path / "outside" / "store"
    shutil.copytree(root / "runs" / run_id, canary / "runs" / "c0ffee00c0ffee00")
    return canary


HOSTILE = [
    ("kernels", "run={canary_run}"),
    ("kernels", "run={canary_abs}"),
    ("kernels", "run=../../outside/store/runs/c0ffee00c0ffee00"),
    ("kernels", "run=c0ffee00c0ffee00"),
    ("kernels", "run=%00%2F"),
    ("kernels", "run={ncu}&kernel=99999999999999999999"),
    ("kernels", "run={ncu}&kernel=-1"),
    ("kernels", "run={ncu}&sort=__class__&q=%5B"),
    ("timeline", "run={canary_abs}"),
    ("timeline", "run={trace}&device=9:9&kernel=(&speedup=nan"),
    ("timeline", "run={trace}&speedup=1e999&kernel=" + "a" * 5000),
    ("compare", "a={canary_abs}&b=../../etc"),
    ("compare", "a={ncu}&b={trace}&noise=-1"),
    ("gpus", "gpu=../../etc/passwd"),
    ("gpus", "gpu=" + "%FF" * 40),
    ("runs", "kind=../..&gpu=/etc/passwd"),
    ("cases", "case=../../etc/passwd"),
    ("cases", "case=tiling.traffic&M=-5"),
    ("cases", "case=tiling.traffic&M=99999999999999999999999"),
    ("cases", "gpu=Voodoo%205&case=tiling.traffic"),
    ("cases", "case=tiling.traffic&meas=x:y:z&meas=l2_read_bytes:1e999:MiB"),
    ("claims", "claim=../../x&verdict=nope"),
    ("live", "every=-5"),
    ("home", "run={canary_abs}"),
]
EXPECT = re.compile(
    r"not a run id|no such run|No trace run|No run kind|No run on GPU|Unknown "
    r"case|Unknown GPU|"
    r"No launch|Unknown sort|No device|not a number|not a percentage|cannot|not "
    r"a|must be|Ignored",
    re.I,
)
#: parameters that are valid (if odd): the page shows them, without a complaint and without an
#: exception
VALID = {("cases", "case=tiling.traffic&M=99999999999999999999999")}


def test_hostile_url_parameters_say_no_such_thing_and_read_nothing_outside_the_store(
    tmp_path, samples_store
):
    if not inotify.available():
        pytest.skip("needs Linux inotify")
    root, ids = samples_store
    canary = _canary(tmp_path, root, ids["full"])
    fill = {
        "canary_abs": str(canary / "runs" / "c0ffee00c0ffee00"),
        "canary_run": "c0ffee00c0ffee00",
        "ncu": ids["full"],
        "trace": ids["m1_eager"],
    }
    with running_dashboard(tmp_path, root) as srv:
        with inotify.Watch(canary.parent) as watch:
            for page_name, query in HOSTILE:
                q = query.format(**fill)
                page = open_page(srv, page_name, q)
                assert page.finished, (page_name, q)
                assert not page.exceptions, (page_name, q, page.exceptions)
                said = " ".join(b for _, b in page.alerts)
                assert "Traceback" not in page.text() and 'File "/' not in page.text()
                if page_name not in ("home", "live", "claims") and (page_name, query) not in VALID:
                    assert EXPECT.search(said), (page_name, q, page.alerts)
            touched = watch.events()
        assert touched == [], touched
        assert srv.alive()


def test_no_page_shows_a_stack_trace_an_internal_error_is_an_error_id(tmp_path, samples_store):
    """A run whose table file is damaged on disk makes the Kernels page fail deep in polars: the
    browser gets an error id, never the exception; the server's log has the traceback under that id."""
    import shutil

    root, ids = samples_store
    store = tmp_path / "store"
    shutil.copytree(root, store)
    broken = next((store / "runs" / ids["full"]).glob("tables-v*/kernels.parquet"))
    broken.write_bytes(b"PAR1 this is not parquet PAR1")
    with running_dashboard(tmp_path, store) as srv:
        page = open_page(srv, "kernels", f"run={ids['full']}")
        assert page.finished and not page.exceptions
        shown = page.text()
        assert "Traceback" not in shown and "polars" not in shown.lower() and ".py" not in shown
        m = re.search(r"error id `([0-9a-f]{8})`", shown)
        assert m, page.alerts
        time.sleep(0.5)
        assert f"error {m.group(1)}" in srv.log.read_text(errors="replace")
        # the other runs are unaffected
        other = open_page(srv, "timeline", f"run={ids['m1_eager']}")
        assert (
            other.finished
            and not other.exceptions
            and not any(k == "error" for k, _ in other.alerts)
        )


def test_one_damaged_run_leaves_the_shared_pages_standing(tmp_path, samples_store):
    """The newest ncu run's table is damaged on disk: Home, Runs and Compare still build (Home says
    which run it is, in place); a run whose manifest is garbage is left out of every listing."""
    import shutil
    from collectors.store import Store
    from dashboard.web.reports import build
    from dashboard.core.source import Source

    root, ids = samples_store
    store = tmp_path / "store"
    shutil.copytree(root, store)
    next((store / "runs" / ids["full"]).glob("tables-v*/kernels.parquet")).write_bytes(
        b"PAR1 no PAR1"
    )
    (store / "runs" / ids["basic"] / "manifest.json").write_text("{ not json")
    src = Source(Store(store))
    home = build(src, "home", {})
    said = " ".join(getattr(b, "md", "") for b in home.blocks)
    # in place, the rest stands
    assert f"Run `{ids['full']}` cannot be analysed (" in said
    assert f"Run `{ids['basic']}` cannot be read" in said
    runs = build(src, "runs", {})
    assert ids["basic"] not in {
        r for b in runs.blocks if hasattr(b, "frame") for r in b.frame["run_id"].to_list()
    }
    build(src, "compare", {"a": ids["m1_eager"], "b": ids["m1_graph"]})
    build(src, "gpus", {})
