"""locust-llm and GuideLLM side by side against the reference server's own stamps.

For each level (closed loop, N concurrent streams) and each tool, a fresh reference server
(``python -m locust_llm.refserver``) serves TTFT 40 ms, 3 tokens per chunk, 40 ms between chunks and
60 tokens per request; it logs, per request, when it received it and when it wrote each chunk. The tool
runs for ``--seconds``; then, per tool and level, this prints:

* TTFT and TPOT P50/P99 error: the tool's percentile minus the same percentile of the server's own figures
  (TTFT = first token chunk written - request received; TPOT = (last - first token chunk) / (tokens - 1));
* tokens received per client CPU-second: output tokens the tool recorded / CPU seconds of its whole process
  tree (start-up, prompt sizing and the post-run report included; ``getrusage(RUSAGE_CHILDREN)`` around the
  run); for locust-llm also the steady-window ingest: the step's output tok/s over the load process's own
  mean CPU in that window (its client monitor), i.e. what each further token costs once the run is going;
* requests completed;
* for locust-llm, the TTFT error per request of the steady window, matched to the server's log by the prompt's hash
  (P50/P99/max): the percentile differences above also take in the warm-up, where every stream starts at once.

GuideLLM is pinned (0.8.1) and installed into its own virtual environment under ``~/.cache/locust-llm`` on
first use, with a small local tokenizer for its synthetic prompts (nothing is fetched from a model hub);
``--skip-peer`` runs locust-llm alone (offline).

    python benchmarks/peer_accuracy.py [--levels 1,16,64,256] [--seconds 15] [--skip-peer]

Loopback only. About a minute per tool and level.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import subprocess
import sys
import tempfile
import textwrap
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
PEER_VERSION = "0.8.1"
PEER_HOME = Path.home() / ".cache" / "locust-llm" / f"peer-guidellm-{PEER_VERSION}"
TOKENS, TTFT_S, GAP_S, PER_CHUNK = 60, 0.040, 0.040, 3
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}

TOKENIZER_SCRIPT = textwrap.dedent("""
    import string, sys
    from faker.providers.lorem.en_US import Provider
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    words = ["[UNK]", "[PAD]", "[BOS]", "[EOS]"] + list(string.punctuation + string.digits + string.ascii_letters)
    for w in Provider.word_list:
        words += [w, w.capitalize()]
    vocab = {}
    for w in words:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                                 pre_tokenizers.Digits(individual_digits=True)])
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", bos_token="[BOS]",
                            eos_token="[EOS]", model_max_length=1_000_000,
                            clean_up_tokenization_spaces=False).save_pretrained(sys.argv[1])
""")


class RefServer:
    def __init__(self, flags: list[str] | None = None):
        flags = flags or ["--ttft-s", str(TTFT_S), "--gap-s", str(GAP_S), "--tokens-per-chunk", str(PER_CHUNK)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "locust_llm.refserver", "--port", "0", *flags],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        line = b""
        while not line.endswith(b"\n"):
            select.select([self.proc.stdout], [], [], 10)
            line += os.read(self.proc.stdout.fileno(), 1)
        self.port = int(line.decode().rsplit(":", 1)[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def logs(self) -> list[dict]:
        with urllib.request.urlopen(self.url + "/ref/logs", timeout=30) as response:
            return json.loads(response.read())["logs"]

    def truth(self) -> tuple[np.ndarray, np.ndarray]:
        """The server's own TTFT and TPOT (ms) of every complete stream."""
        ttft, tpot = [], []
        for log in self.logs():
            times = [c[0] for c in log["chunks"] if c[1] > 0]
            if log["complete"] and len(times) > 1:
                ttft.append((times[0] - log["t_recv"]) * 1000)
                tpot.append((times[-1] - times[0]) / (TOKENS - 1) * 1000)
        return np.array(ttft), np.array(tpot)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def matched_ttft_error(frame: pd.DataFrame, logs: list[dict]) -> np.ndarray:
    """Per request of the steady window, the client's TTFT minus the server's own for that request (ms), matched by
    the prompt's hash: what a user's figures carry, where percentiles of two sets could hide a shifted tail."""
    served = {log["prompt_hash"]: log for log in logs if log["complete"]}
    steady = frame[(frame["phase"] == "steady") & frame["error_class"].isna() & frame["prompt_hash"].isin(served)]
    truth = [next(c[0] for c in served[h]["chunks"] if c[1] > 0) - served[h]["t_recv"] for h in steady["prompt_hash"]]
    return ((steady["t_first"] - steady["t_send"]).to_numpy() - np.array(truth)) * 1000


def run_measured(command: list[str], **kwargs) -> float:
    """Run ``command`` to its end; the CPU seconds it and all its children used. (locust-llm's exit code is
    its verdict, e.g. 5 when the 2-core box made the client the bottleneck: the figures are read anyway.)"""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_locust_llm(server: RefServer, streams: int, seconds: float, work: Path) -> tuple:
    scenario = work / "peer.yaml"
    scenario.write_text(
        textwrap.dedent(f"""
        name: peer
        server: {{engine: external, url: "{server.url}"}}
        variants: {{ref: {{}}}}
        load: {{mode: closed, ladder: [{streams}], step_duration_s: {seconds}, warmup_s: 0.5,
               prompt_tokens: 16, max_tokens: {TOKENS}}}
    """)
    )
    cpu = run_measured(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            "locustfiles/spec_decode.py",
            "--headless",
            "--skip-log",
            "--host",
            server.url,
            "--scenario",
            str(scenario),
            "--report-dir",
            str(work),
            "--run-id",
            f"ll-{streams}",
        ],
        cwd=REPO,
    )
    frame = pd.read_parquet(work / f"ll-{streams}" / "requests.parquet")
    ok = frame[frame["error_class"].isna()]
    ttft = (ok["t_first"] - ok["t_send"]) * 1000
    tpot = (ok["t_end"] - ok["t_first"]) / (ok["output_tokens"] - 1) * 1000
    (step,) = json.loads((work / f"ll-{streams}" / "summary.json").read_text())["variants"]["ref"]["steps"]
    busy = (step.get("client_validity") or {}).get("cpu_percent_max")
    steady = step["output_tps"] / (busy / 100) if busy else None
    matched = matched_ttft_error(frame, server.logs())
    return ttft.to_numpy(), tpot.to_numpy(), int(ok["output_tokens"].sum()), len(ok), cpu, steady, matched


def ensure_peer() -> Path:
    guidellm = PEER_HOME / "bin" / "guidellm"
    if not guidellm.exists():
        print(f"installing guidellm {PEER_VERSION} into {PEER_HOME} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(PEER_HOME)], check=True)
        subprocess.run([str(PEER_HOME / "bin" / "pip"), "install", "-q", f"guidellm=={PEER_VERSION}"], check=True)
    tokenizer = PEER_HOME / "tiny-tokenizer"
    if not (tokenizer / "tokenizer.json").exists():
        script = PEER_HOME / "make_tokenizer.py"
        script.write_text(TOKENIZER_SCRIPT)
        subprocess.run(
            [str(PEER_HOME / "bin" / "python"), str(script), str(tokenizer)], check=True, env={**os.environ, **OFFLINE}
        )
    return guidellm


def run_guidellm(guidellm: Path, server: RefServer, streams: int, seconds: float, work: Path) -> tuple:
    out = work / f"guidellm-{streams}.json"
    cpu = run_measured(
        [
            str(guidellm),
            "run",
            "--backend",
            f"kind=openai_http,target={server.url},model=refserver-model,request_format=/v1/completions",
            "--profile",
            f"kind=concurrent,streams={streams}",
            "--constraint",
            f"kind=max_duration,seconds={seconds}",
            "--data",
            f"kind=synthetic_text,prompt_tokens=16,output_tokens={TOKENS}",
            "--tokenizer",
            f"kind=huggingface_auto,model={PEER_HOME / 'tiny-tokenizer'}",
            "--output",
            f"kind=json,path={out}",
            "--disable-console",
        ],
        cwd=work,
        env={**os.environ, **OFFLINE},
    )
    ok = json.loads(out.read_text())["benchmarks"][0]["requests"]["successful"]
    ttft = np.array([r["time_to_first_token_ms"] for r in ok if r["time_to_first_token_ms"] is not None])
    tpot = np.array([r["inter_token_latency_ms"] for r in ok if r["inter_token_latency_ms"] is not None])
    return ttft, tpot, sum(r["output_tokens"] or 0 for r in ok), len(ok), cpu, None, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,16,64,256")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--skip-peer", action="store_true", help="locust-llm alone (no GuideLLM, offline)")
    args = parser.parse_args()
    tools = {"locust-llm": run_locust_llm}
    if not args.skip_peer:
        guidellm = ensure_peer()
        tools["GuideLLM " + PEER_VERSION] = lambda *a: run_guidellm(guidellm, *a)
    print(
        f"{'streams':>7} {'tool':<15} {'TTFT err P50/P99 ms':>21} {'TPOT err P50/P99 ms':>21} "
        f"{'tokens/CPU-s':>13} {'steady':>9} {'requests':>9}  {'matched TTFT err P50/P99/max ms (steady)':>41}",
        flush=True,
    )
    for streams in [int(x) for x in args.levels.split(",")]:
        for name, run in tools.items():
            server = RefServer()
            try:
                with tempfile.TemporaryDirectory() as work:
                    ttft, tpot, tokens, requests, cpu, steady, matched = run(server, streams, args.seconds, Path(work))
                true_ttft, true_tpot = server.truth()
            finally:
                server.stop()
            err = [
                np.percentile(a, q) - np.percentile(b, q)
                for a, b in ((ttft, true_ttft), (tpot, true_tpot))
                for q in (50, 99)
            ]
            print(
                f"{streams:>7} {name:<15} {err[0]:>+9.2f} / {err[1]:>+9.2f} {err[2]:>+9.3f} / {err[3]:>+9.3f} "
                f"{tokens / cpu:>13,.0f} {f'{steady:,.0f}' if steady else 'n/m':>9} {requests:>9}  "
                + (
                    " / ".join(f"{v:>+9.2f}" for v in (*np.percentile(matched, [50, 99]), matched.max()))
                    if matched is not None and matched.size
                    else f"{'n/m':>41}"
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
