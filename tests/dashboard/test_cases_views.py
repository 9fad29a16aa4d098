"""The "Textbook cases" and "Claims" pages (dashboard/web/views/cases.py, claims.py) rebuilt from the URL."""

from __future__ import annotations

import json


from tests.dashboard.helpers import dataframes
from streamlit.testing.v1 import AppTest

from tests.conftest import REPO

CASES = str(REPO / "dashboard" / "web" / "views" / "cases.py")
CLAIMS = str(REPO / "dashboard" / "web" / "views" / "claims.py")


def page(path: str, **params) -> AppTest:
    at = AppTest.from_file(path, default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def q(at, key: str):
    """One query parameter as the page left it (AppTest keeps a string or a list of strings)."""
    v = at.query_params[key]
    return v[0] if isinstance(v, list) and len(v) == 1 else v


def predictions(at) -> dict[str, str]:
    df = next(d for d in dataframes(at) if "quantity" in d.columns)
    return dict(zip(df["quantity"], df["value"]))


def chart_specs(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]


def test_tiling_page_from_the_url():
    at = page(CASES, case="tiling.traffic", n="128")
    assert at.selectbox[0].value == "tiling.traffic"
    assert at.selectbox[1].value == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    pr = predictions(at)
    assert (
        pr["traffic"] == "2328 MiB"
        and pr["smem_per_block"] == "44 KiB"
        and pr["blocks_by_smem"] == "2"
    )
    specs = chart_specs(at)
    assert specs and "traffic vs square tile size" in json.dumps(specs[0])
    assert q(at, "case") == "tiling.traffic" and q(at, "n") == "128"
    figures = next(d for d in dataframes(at) if "figure" in d.columns)
    assert set(figures["check"]) == {"agrees"}


def test_gpu_in_the_url_changes_the_answer():
    at = page(CASES, case="occupancy.sm", gpu="A100")
    assert at.selectbox[1].value == "NVIDIA A100 SXM4 80GB"
    assert predictions(at)["occupancy"] == "12.5 %"
    at = page(CASES, case="occupancy.sm")
    assert predictions(at)["occupancy"] == "25 %"
    # the chapter's GPU is the default: not in the URL
    assert "gpu" not in at.query_params


def test_widget_changes_are_written_back_to_the_url():
    at = page(CASES, case="tiling.traffic")
    # the parameters: a table until "Edit parameters"
    assert [n.label for n in at.number_input] == ["measured value"]
    params = next(d for d in dataframes(at) if "parameter" in d.columns)
    assert dict(zip(params["parameter"], params["value"]))["m"] == "64"
    at.toggle(key="case:edit").set_value(True).run()
    at.number_input(key="case:tiling.traffic:m:").set_value(128).run()
    at.number_input(key="case:tiling.traffic:n:").set_value(128).run()
    assert q(at, "m") == "128" and q(at, "n") == "128"
    assert predictions(at)["traffic"] == "1560 MiB"
    # the table shows the changed values, the URL keeps them
    at.toggle(key="case:edit").set_value(False).run()
    params = next(d for d in dataframes(at) if "parameter" in d.columns)
    assert dict(zip(params["parameter"], params["value"]))["m"] == "128" and q(at, "m") == "128"
    assert predictions(at)["traffic"] == "1560 MiB"
    at.selectbox[0].set_value("dispatch.call_ratio").run()
    assert q(at, "case") == "dispatch.call_ratio"
    # the old case's parameters are gone
    assert "m" not in at.query_params and "n" not in at.query_params
    assert predictions(at)["new_mean"] == "12.5 µs"


def test_bad_parameter_shows_an_error_not_numbers():
    at = page(CASES, case="tiling.traffic", m="4096")
    assert any("tile m=4096 is larger than the matrix (M=1024)" in e.value for e in at.error)
    assert not at.get("vega_lite_chart")
    at = page(CASES, case="no.such.case")
    assert any("Unknown case 'no.such.case'" in w.value for w in at.warning)
    assert at.selectbox[0].value == "tiling.traffic"


def test_measurement_in_the_url_gets_a_verdict():
    at = page(CASES, case="fusion.activation_chain", meas="unfused_time:40:µs")
    table = next(d for d in dataframes(at) if "verdict" in d.columns)
    row = table[table["quantity"] == "unfused_time"].iloc[0]
    assert row["verdict"] == "differs-explained" and "L2 rate" in row["explanation"]
    assert any("14.2 µs for 120 MiB" in m.value for m in at.markdown)  # the chapter check
    at = page(CASES, case="fusion.activation_chain", meas="unfused_time:14.2:µs")
    table = next(d for d in dataframes(at) if "verdict" in d.columns)
    assert table[table["quantity"] == "unfused_time"].iloc[0]["verdict"] == "differs-unexplained"


def test_pipeline_chart_and_narrative_case():
    at = page(CASES, case="pipeline.double_buffer")
    assert predictions(at)["pipelined_time"] == "5.44 µs"
    spec = json.dumps(chart_specs(at)[0])
    assert "pipeline time vs number of buffers" in spec and "slots" in spec
    at = page(CASES, case="shapes.specialize")
    assert "total time vs number of groups" in json.dumps(chart_specs(at)[0])
    at = page(CASES, case="runtime.host_bound")
    assert any("No runnable model" in i.value for i in at.info)
    assert not at.get("vega_lite_chart")


def test_claims_page():
    at = page(CLAIMS)
    df = dataframes(at)[0]
    verdicts = dict(zip(df["id"], df["verdict"]))
    assert (
        verdicts["a10g.mma_sync_tflops"] == "above-peak"
        and verdicts["triton.a100_matmul_rate"] == "unit-error"
    )
    at = page(CLAIMS, verdict="refuted", claim="bank.tile_width_rule")
    df = dataframes(at)[0]
    assert set(df["verdict"]) == {"refuted"}
    assert at.selectbox[0].value == "bank.tile_width_rule"
    evidence = dataframes(at)[1]
    assert list(evidence["check"]) == ["bank_rule"] and list(evidence["verdict"]) == ["refuted"]
    details = dataframes(at)[2]
    assert list(details["degree"]) == [1, 32, 1]
    assert q(at, "claim") == "bank.tile_width_rule"
