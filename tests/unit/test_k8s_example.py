"""The Kubernetes example's web UI is reachable through its Service: the master binds it beyond 127.0.0.1."""

import yaml

from tests.helpers import REPO


def test_the_masters_web_ui_listens_where_the_service_sends():
    docs = list(yaml.safe_load_all((REPO / "docs" / "k8s" / "locust-llm.yaml").read_text()))
    service = next(d for d in docs if d["kind"] == "Service")
    web = next(p for p in service["spec"]["ports"] if p["name"] == "web")
    master = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("master"))
    (container,) = master["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    # The plugin binds 127.0.0.1 unless --web-host is given (runtime.webui.install); a Service cannot reach that.
    assert args[args.index("--web-host") + 1] == "0.0.0.0"
    port = int(args[args.index("--web-port") + 1]) if "--web-port" in args else 8089  # Locust's default
    assert web["targetPort"] == port and {"containerPort": port} in container["ports"]
