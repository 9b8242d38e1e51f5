"""The inputs of a capture (docs/theory/heads.md): standard-library docstrings, images that
ship inside scikit-image, text files and token ids, each as a :class:`Source`."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import InvalidArgumentError
from ...ids import check_id_part

__all__ = ["SKIMAGE_IMAGES", "Source", "read_sources"]

_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")

#: Images that ship inside the scikit-image wheel (``skimage.data``, no download).
SKIMAGE_IMAGES = ("astronaut", "brick", "camera", "cat", "cell", "chelsea", "coffee", "coins",
                  "grass", "gravel", "horse", "hubble_deep_field", "immunohistochemistry",
                  "logo", "microaneurysms", "moon", "page", "retina", "rocket", "text")


@dataclass
class Source:
    """One input: ``kind`` is ``"text"`` (``data`` a str), ``"ids"`` (1-D int ndarray of
    token ids) or ``"image"`` (an ``(H, W, 3)`` uint8/float ndarray or a PIL image)."""

    name: str
    kind: str
    data: Any = field(repr=False)


def _stdlib(spec: str) -> list[Source]:
    from ..text import stdlib_sources

    every = stdlib_sources(64)
    if spec == "stdlib":
        return [Source(n, "text", t) for n, t in every]
    name = spec.split(":", 1)[1]
    texts = dict(every)
    if name not in texts:
        raise InvalidArgumentError(
            f"source: {spec!r} names none of the 64 standard-library sources; choose from "
            f"{', '.join(list(texts)[:8])}, ... (softrank.generators.text.stdlib_sources)")
    return [Source(name, "text", texts[name])]


def _skimage(spec: str) -> Source:
    name = spec.split(":", 1)[1]
    try:
        from skimage import data as skdata
    except ImportError as exc:
        raise InvalidArgumentError(f"source: {spec!r} needs scikit-image "
                                   "(pip install scikit-image)") from exc
    if name not in SKIMAGE_IMAGES:  # others need a download, which softrank never does
        raise InvalidArgumentError(f"source: {spec!r}: expected one of the images bundled with "
                                   f"scikit-image: {', '.join(SKIMAGE_IMAGES)}")
    try:
        img = np.asarray(getattr(skdata, name)())
    except Exception as exc:
        raise InvalidArgumentError(f"source: {spec!r} cannot be read ({exc})") from exc
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    if img.ndim != 3 or img.shape[-1] not in (3, 4):
        raise InvalidArgumentError(f"source: {spec!r} is not a colour image "
                                   f"(shape {img.shape})")
    return Source(f"skimage-{name}", "image", img[..., :3])


def _file(p: pathlib.Path, spec: str) -> Source:
    suffix = p.suffix.lower()
    if suffix in _IMAGE_SUFFIXES:
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(p) as im:
                return Source(p.stem, "image", np.asarray(im.convert("RGB")))
        except (OSError, UnidentifiedImageError) as exc:
            raise InvalidArgumentError(f"source: {spec!r} is not a readable image ({exc})") from exc
    if suffix == ".npy":
        try:
            arr = np.load(p, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(f"source: {spec!r} is not a readable .npy array ({exc})") from exc
        if arr.ndim == 1 and np.issubdtype(arr.dtype, np.integer):
            return Source(p.stem, "ids", arr.astype(np.int64))
        if arr.ndim == 3 and arr.shape[0] == 3 and (np.issubdtype(arr.dtype, np.integer) or
                                                    np.issubdtype(arr.dtype, np.floating)):
            if not np.isfinite(arr).all():
                raise InvalidArgumentError(f"source: {spec!r} holds NaN or inf pixels")
            if arr.min() < 0 or arr.max() > 255:
                raise InvalidArgumentError(
                    f"source: {spec!r} has pixels in [{arr.min():g}, {arr.max():g}]; expected "
                    "values in [0, 255] (the image processor rescales by 1/255)")
            if np.issubdtype(arr.dtype, np.floating) and arr.max() <= 1.0:
                raise InvalidArgumentError(
                    f"source: {spec!r} has float pixels all <= 1, as if already scaled to "
                    "[0, 1]; give values in [0, 255] (multiply by 255)")
            # 8-bit like every other image source (PNG, JPEG, skimage): the image processors
            # convert to PIL images, which take floats only in [0, 1]
            return Source(p.stem, "image", np.rint(np.moveaxis(arr, 0, -1)).astype(np.uint8))
        raise InvalidArgumentError(
            f"source: {spec!r} has shape {arr.shape} and dtype {arr.dtype}; expected 1-D "
            "integer token ids or (3, H, W) real pixels in [0, 255]")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"source: {spec!r} is not a readable UTF-8 text file ({exc})") from exc
    if not text.strip():
        raise InvalidArgumentError(f"source: {spec!r} is empty")
    return Source(p.stem, "text", text)


def read_sources(specs: Sequence[str] | str, base: pathlib.Path | None = None) -> list[Source]:
    """Inputs from source specs.

    Parameters
    ----------
    specs : str or sequence of str
        Each one of: ``stdlib`` (64 standard-library docstring sources, docs/theory/heads.md) or
        ``stdlib:MODULE``; ``skimage:NAME`` (an image bundled with scikit-image, e.g.
        ``skimage:astronaut``); a text file (UTF-8); a ``.npy`` of 1-D integer token ids or of
        ``(3, H, W)`` pixels in ``[0, 255]`` (rounded to 8 bits); a ``.png``/``.jpg`` image;
        or a directory (its files, sorted, not recursive, dotfiles skipped).
    base : pathlib.Path, optional
        Relative paths are taken from here (a panel file's directory).

    Returns
    -------
    list of Source
        Named by the file's stem (``skimage-NAME``, the module name for ``stdlib``); a name
        becomes part of operator ids.

    Raises
    ------
    InvalidArgumentError
        Naming ``source`` and the spec: not found, unreadable, wrong shape or dtype, empty;
        or naming ``source`` and the name: names repeat, or a name that
        :func:`softrank.ids.check_id_part` refuses (e.g. a file stem with ``|``, ``..`` or
        a control character).
    """
    if isinstance(specs, str):
        specs = [specs]
    out: list[Source] = []
    for spec in specs:
        if not isinstance(spec, str) or not spec:
            raise InvalidArgumentError(f"source: expected a non-empty string, got {spec!r}")
        if spec == "stdlib" or spec.startswith("stdlib:"):
            out.extend(_stdlib(spec))
            continue
        if spec.startswith("skimage:"):
            out.append(_skimage(spec))
            continue
        p = pathlib.Path(spec)
        if base is not None and not p.is_absolute():
            p = base / p
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
            if not files:
                raise InvalidArgumentError(f"source: directory {spec!r} has no files")
            out.extend(_file(f, str(f)) for f in files)
        elif p.is_file():
            out.append(_file(p, spec))
        else:
            raise InvalidArgumentError(f"source: {spec!r} is not a file, a directory, 'stdlib[:MODULE]' "
                                       "or 'skimage:NAME'")
    for s in out:
        check_id_part(s.name, "source")
    names = [s.name for s in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InvalidArgumentError(f"source: names repeat ({', '.join(dup)}); operator ids would collide")
    return out
