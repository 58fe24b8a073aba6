"""``python -m locust_llm.refserver``: run the reference streaming server (``refserver.server``).

    python -m locust_llm.refserver --port 8000 [--ttft-s 0.05 --gap-s 0.01 --tokens-per-chunk 1,3 ...]
                                   [--image-ms-per-kpx 0.2] [--slots 4] [--reasoning-tokens 40]

``--port 0`` binds a free port; the first line on stdout is ``refserver listening on ADDRESS:PORT``.
``--slots K`` caps the streams generated at once (llama.cpp's ``-np``): later requests queue, FIFO, and the
wait shows up in their TTFT, so a saturated server can be played; 0 (the default) is unlimited.
``--api-key KEY`` refuses requests without the bearer token and counts them (``refserver.auth``).
``--cache-block B`` (16; 0 off), ``--cache-blocks N`` and ``--metrics-style`` shape its prompt cache and the counters
``/metrics`` shows (``refserver.cache``); ``--prefill-s-per-token`` makes uncached prompt tokens cost TTFT.
"""

from __future__ import annotations

import argparse
import contextlib
import json

from .auth import require_key
from .cache import METRIC_STYLES, PrefixCache
from .config import DEFAULTS, FRAMINGS, MODEL, MODELS_ANSWERS, REASONING_FORMATS, USAGE_MODES, BadRequest
from .crash import exit_on
from .server import make_server

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m locust_llm.refserver", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8000, help="port on --bind; 0 picks a free one")
    parser.add_argument(
        "--bind",
        default="127.0.0.1",
        help="address to listen on (a test's private network namespace; never a public one)",
    )
    parser.add_argument("--ttft-s", type=float, default=DEFAULTS["ttft_s"])
    parser.add_argument("--gap-s", type=float, default=DEFAULTS["gap_s"])
    parser.add_argument("--tokens-per-chunk", default="1", help="an int or a comma list cycled, e.g. 1,3,2,4")
    parser.add_argument("--usage", choices=USAGE_MODES, default=DEFAULTS["usage"])
    parser.add_argument("--llamacpp", action="store_true")
    parser.add_argument("--fault", default="none")
    parser.add_argument("--stall-once-s", type=float, default=0.0)
    parser.add_argument("--pause-once-s", type=float, default=0.0)
    parser.add_argument("--headers-late", action="store_true", help="send headers with the first chunk, not at once")
    parser.add_argument(
        "--framing",
        choices=FRAMINGS,
        default="chunked",
        help="chunked (one HTTP chunk per event) or close (the body ends with the connection)",
    )
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--patch-last", default="{}", help="JSON: dotted paths set in each stream's last token chunk")
    parser.add_argument(
        "--usage-factor", type=float, default=1.0, help="report every usage count times this (a server that miscounts)"
    )
    parser.add_argument(
        "--models-answer",
        choices=MODELS_ANSWERS,
        default="object",
        help="how /v1/models answers: OpenAI's object, a bare list, or garbage",
    )
    parser.add_argument(
        "--image-ms-per-kpx",
        type=float,
        default=DEFAULTS["image_ms_per_kpx"],
        help="prefill time added per thousand pixels of the images in a chat request (ms)",
    )
    parser.add_argument(
        "--reasoning-tokens", type=int, default=0, help="the first N output tokens are reasoning, before the answer"
    )
    parser.add_argument("--reasoning-format", choices=REASONING_FORMATS, default=DEFAULTS["reasoning_format"])
    parser.add_argument(
        "--reasoning-details",
        action="store_true",
        help="usage also says completion_tokens_details.reasoning_tokens",
    )
    parser.add_argument(
        "--slots",
        type=int,
        default=0,
        help="at most this many streams generate at once; the others wait, FIFO, and the wait "
        "adds to their TTFT (llama.cpp's -np); 0: unlimited",
    )
    parser.add_argument(
        "--api-key",
        default="",
        help="refuse (401) requests without 'Authorization: Bearer KEY'; GET /ref/auth counts who had it",
    )
    parser.add_argument(
        "--prefill-s-per-token",
        type=float,
        default=DEFAULTS["prefill_s_per_token"],
        help="prefill time per prompt token the prompt cache did not hold, added to the TTFT delay (s)",
    )
    parser.add_argument(
        "--cache-block", type=int, default=16, help="prompt cache block size in tokens (words); 0 turns it off"
    )
    parser.add_argument("--cache-blocks", type=int, default=100_000, help="prompt cache capacity in blocks (LRU)")
    parser.add_argument(
        "--cache-unreported",
        action="store_true",
        help="the prompt cache works but says nothing: no cached_tokens in usage, no /metrics",
    )
    parser.add_argument(
        "--metrics-style", choices=METRIC_STYLES, default="vllm", help="the engine whose names /metrics uses"
    )
    parser.add_argument(
        "--max-model-len",
        type=int,
        default=0,
        help="state this context (tokens per request) in /v1/models, as vLLM does; 0: state none",
    )
    parser.add_argument(
        "--unique-answers",
        action="store_true",
        help="token k of the n-th completion is ' w<k>s<n>': every answer its own",
    )
    parser.add_argument("--exit-on", default="", help="exit at once (a crash) when a request body holds this text")
    parser.add_argument("--access-log", action="store_true")
    args = parser.parse_args(argv)
    try:
        tpc = [int(x) for x in args.tokens_per_chunk.split(",")]
    except ValueError:
        parser.error(f"--tokens-per-chunk: not an int list: {args.tokens_per_chunk!r}")
    if args.slots < 0:
        parser.error(f"--slots must be >= 0 (0: unlimited), got {args.slots}")
    defaults = {
        "ttft_s": args.ttft_s,
        "gap_s": args.gap_s,
        "tokens_per_chunk": tpc if len(tpc) > 1 else tpc[0],
        "usage": args.usage,
        "llamacpp": args.llamacpp,
        "fault": args.fault,
        "stall_once_s": args.stall_once_s,
        "pause_once_s": args.pause_once_s,
        "headers_early": not args.headers_late,
        "framing": args.framing,
        "patch_last": json.loads(args.patch_last),
        "image_ms_per_kpx": args.image_ms_per_kpx,
        "prefill_s_per_token": args.prefill_s_per_token,
        "reasoning_tokens": args.reasoning_tokens,
        "reasoning_format": args.reasoning_format,
        "reasoning_details": args.reasoning_details,
        "unique_answers": args.unique_answers,
        "usage_factor": args.usage_factor,
    }
    try:
        cache = PrefixCache(args.cache_block, args.cache_blocks, args.metrics_style, not args.cache_unreported)
        server = make_server(
            args.port,
            defaults,
            args.model,
            args.access_log,
            args.models_answer,
            args.bind,
            slots=args.slots,
            cache=cache,
            max_model_len=args.max_model_len or None,
        )
    except (BadRequest, ValueError) as exc:
        parser.error(str(exc))
    if args.exit_on:
        server.application = exit_on(server.application, args.exit_on.encode())
    if args.api_key:
        server.application = require_key(server.application, args.api_key)
    server.init_socket()
    print(f"refserver listening on {args.bind}:{server.server_port}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0
