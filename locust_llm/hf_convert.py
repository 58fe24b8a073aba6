"""GGUF -> a Hugging Face directory (fp32 safetensors, config, tokenizer) that vLLM loads.

Run as a script by the Python of the vLLM environment (it has torch and transformers; the main environment does
not): ``python hf_convert.py MODEL.gguf OUT_DIR``. Imports nothing from locust_llm, so it runs there uninstalled.

transformers reads a GGUF (``from_pretrained(..., gguf_file=...)``, dequantized to fp32) but refuses to save a model
it loaded that way ("quantized with QuantizationMethod.GGUF and is not serializable"); a fresh model built from the
same config, without its quantization_config, takes the loaded weights (every key matches) and saves.
"""

from __future__ import annotations

import sys
from pathlib import Path


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.torch_dtype = torch.float32
    fresh = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    fresh.load_state_dict(loaded.state_dict(), strict=True)  # raises on any missing or unexpected key
    fresh.generation_config = loaded.generation_config
    fresh.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: hf_convert.py MODEL.gguf OUT_DIR")
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
