"""Export a trained model in the Hugging Face Hub layout (``iclab export``), offline.

    DIR/
      config.json         model_type "iclab", architectures [class], and under "iclab" what the
                          checkpoint records (class, arguments, prompt format, task, name, seed, step, ...)
                          plus the run's experiment, scale and training recipe
      model.safetensors   the weights under iclab's parameter names (metadata format: pt)
      README.md           a model card: the task, prompt format, model, training recipe and the run's claims

:func:`iclab.load_model` reads such a folder (see :mod:`iclab.models.convert` for the mapping);
``huggingface-cli upload`` can publish it as it is.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path

import yaml

from .claims import kind_of, paper_value_text, summary, verdict_text
from .config import ConfigError
from .loading import open_source
from .models.convert import to_hub
from .runs import SCRATCH_SUFFIX, RunFolder, unwritable


def export(
    run: str | Path, out: str | Path, model: str | None = None, seed: int | None = None, step: int | None = None
) -> Path:
    """Write one model of ``run`` (a finished run, an export or a Garg et al. run) to the folder
    ``out`` (new, or empty), in the layout of the module docstring; returns ``out``."""
    source = open_source(run)
    checkpoint = source.checkpoint(model, seed, step)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out} already exists and is not an empty folder; exports are never overwritten")
    state, metadata = source.read(checkpoint)
    recipe = {}
    if source.config is not None:
        recipe = {k: source.config[k] for k in ("experiment", "scale", "train") if k in source.config}
    tensors, config = to_hub(state, {**metadata, **recipe})
    claims = RunFolder(source.path).read_claims() if source.kind == "run" else []

    from safetensors.torch import save_file

    # Written whole or not at all: a scratch folder beside ``out``, renamed to it once every file is in.
    scratch = out.with_name(f".{out.name}.{secrets.token_hex(4)}{SCRATCH_SUFFIX}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        scratch.mkdir()
        save_file(tensors, scratch / "model.safetensors", metadata={"format": "pt"})
        (scratch / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        (scratch / "README.md").write_text(model_card(config["iclab"], claims, source.path.name))
        scratch.chmod(0o755)  # readable by whoever the folder is shared or uploaded with, whatever the umask
        for file in scratch.iterdir():
            file.chmod(0o644)
        os.replace(scratch, out)  # over nothing, or over an empty folder
    except OSError as err:  # a folder that cannot be made, a full disk, a file-size limit
        raise unwritable(out, err, "write the export") from None
    except Exception as err:  # safetensors' own error for a failed write
        if "Error while serializing" not in str(err):
            raise
        raise unwritable(out, OSError(str(err).splitlines()[0]), "write the export") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def model_card(facts: dict, claims: list[dict], source: str) -> str:
    """The README of an export: what the model is, what it was trained on and what its run found;
    ``source`` names the run folder (its name only: a card never records a local path)."""
    experiment = facts.get("experiment")
    tags = ["in-context-learning", "iclab"] + ([experiment] if experiment else [])
    origin = (
        f"experiment `{experiment}` ({facts.get('scale', '?')} scale)"
        if experiment
        else facts.get("source", "outside iclab")
    )
    lines = [
        "---",
        "library_name: iclab",
        f"tags: [{', '.join(tags)}]",
        "---",
        "",
        f"# {facts.get('name', 'model')}, seed {facts.get('seed')}, step {facts.get('step')}",
        "",
        f"A `{facts['class']}` trained to learn in context, from {origin}, exported by iclab from `{source}`.",
        "",
        "## Task",
        "",
        "```json",
        json.dumps(facts.get("task"), indent=2),
        "```",
        "",
        "## Prompt format",
        "",
        "```json",
        json.dumps(facts.get("prompt_format"), indent=2),
        "```",
        "",
        "## Model",
        "",
        "```json",
        json.dumps({"class": facts["class"], "arguments": facts["arguments"]}, indent=2),
        "```",
        "",
    ]
    if "train" in facts:
        lines += [
            "## Training recipe",
            "",
            "```yaml",
            yaml.safe_dump(facts["train"], sort_keys=False).rstrip(),
            "```",
            "",
        ]
    if claims:
        lines += [
            f"## The run's claims ({summary(claims)})",
            "",
            "| claim | kind | verdict | measured | the paper's number | expected |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {c['id']} | {kind_of(c)} | {verdict_text(c)} | {_cell(c['measured'])} | "
            f"{_cell(paper_value_text(c))} | {_cell(c['expected'])} |"
            for c in claims
        ]
        lines.append("")
    lines += [
        "## Use",
        "",
        "```python",
        "import iclab",
        "",
        'loaded = iclab.load_model("path/to/this/folder")  # .model, .task, .prompt_format',
        "```",
        "",
        "or `iclab eval path/to/this/folder --shift skewed`.",
        "",
    ]
    return "\n".join(lines)


def _cell(value) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")
