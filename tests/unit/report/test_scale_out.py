"""Scale-out in the report (``report.scale_out``) from a hand-built scale-out summary: which servers the N-server
steps used, the verdict's class, the per-server spread and the gate."""

from locust_llm.analysis.documents.scale_out import ScaleOutSummary, ScaleOutVariant, ScaleStep, ServerShare
from locust_llm.report.scale_out import scale_out_lines, scale_out_section, servers_text
from tests.unit.report.documents import step, summary, view


def test_the_servers_are_the_launched_replicas_logs_or_the_external_urls():
    launched = {"spec": {"engine": "llamacpp", "replicas": [{"launched": True, "log": "/runs/r/server-spec-2.log"}]}}
    v = view(summary({"spec": [step(1.0)]}), env={"servers": launched})
    assert servers_text(v, "spec", 2).startswith("2 llamacpp servers of the same command on one host")
    assert "(logs: server-spec-2.log beside the first)" in servers_text(v, "spec", 2)
    external = {"spec": {"url": "http://127.0.0.1:8001", "replicas": [{"url": "http://127.0.0.1:8002"}]}}
    v = view(summary({"spec": [step(1.0)]}), env={"servers": external})
    assert servers_text(v, "spec", 2) == "2 external servers: http://127.0.0.1:8001, http://127.0.0.1:8002"
    v = view(summary({"spec": [step(1.0)]}), env={"servers": {"spec": None}})
    assert servers_text(v, "spec", 3) == "3 servers (the further ones never came up)"


def test_the_section_shows_each_steps_spread_and_the_gate():
    shares = [ServerShare(server=0, requests=30, errors=0, output_tokens=900, share=0.6)]
    shares.append(ServerShare(server=1, requests=20, errors=0, output_tokens=600, share=0.4))
    steps = [
        ScaleStep(step=0, pair=0, servers=2, level=8.0, server_level=4.0, status="clean", per_server=shares),
    ]
    entry = ScaleOutVariant(
        variant="spec", servers=2, server_level=4.0, unit="users", steps=steps, scaling="sub-linear", text="1.6x"
    )
    doc = ScaleOutSummary(servers=2, level=4.0, pairs=1, min_efficiency=0.8, method="m", variants=[entry], text="t")
    section = scale_out_section(view(summary({"spec": [step(1.0)]}, scale_out=doc)))
    (variant,) = section["variants"]
    assert variant["cls"] == "warn" and variant["steps"][0]["spread"] == "server 1: 30 (60.0%), server 2: 20 (40.0%)"
    assert section["gate"] == "scale_out.min_efficiency 0.8"
    assert scale_out_lines(summary({"spec": [step(1.0)]}, scale_out=doc)) == ["scale-out: 1.6x"]
