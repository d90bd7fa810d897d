"""An Agg canvas that rasterises each distinct text once and then only copies its pixels.

Redrawing a figure whose axis limits change means drawing its tick labels again, and in
matplotlib every text is laid out and rasterised glyph by glyph on every draw: about a
millisecond per label, the largest part of an explorer update. Tick labels, titles and axis
labels repeat ("0.5", "1e-08", "x"), so ``TextCachingCanvas`` records the glyph images Agg
draws for a string the first time and replays them afterwards.

To make replaying exact, plain text is anchored on whole pixels (moves by at most half a
pixel). Mathtext and anything the renderer draws besides glyph images are never cached.
If a matplotlib version draws text differently, the cache is not used and text is drawn
as usual.
"""
from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg

MAX_ENTRIES = 4096


class _Recorder:
    """Stands in for the Agg core while one text is drawn: passes calls on, keeps glyph images."""

    def __init__(self, core) -> None:
        self.core = core
        self.glyphs: list[tuple[np.ndarray, int, int, float]] = []
        self.other = False

    def draw_text_image(self, image, x, y, angle, gc) -> None:
        self.glyphs.append((np.array(image, copy=True), int(x), int(y), angle))
        self.core.draw_text_image(image, x, y, angle, gc)

    def __getattr__(self, name):  # anything else (boxes, paths): still drawn, but not cacheable
        self.other = True
        return getattr(self.core, name)


class TextCachingRenderer(RendererAgg):
    """RendererAgg whose ``draw_text`` replays the glyph images of strings it has drawn before."""

    def __init__(self, width, height, dpi) -> None:
        super().__init__(width, height, dpi)
        self.text_cache: dict[tuple, list | None] = {}
        self.hits = self.misses = 0

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        core = getattr(self, "_renderer", None)
        if ismath or core is None:
            return super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)
        x, y = round(x), round(y)
        extras = (mtext.get_fontfeatures(), mtext.get_language()) if hasattr(mtext, "get_language") else ()
        key = (s, prop.copy(), float(angle), bool(gc.get_antialiased()), extras)
        glyphs = self.text_cache.get(key)
        if glyphs is not None:
            self.hits += 1
            for image, gx, gy, gangle in glyphs:  # positions relative to the (whole-pixel) anchor
                core.draw_text_image(image, gx + x, gy + y, gangle, gc)
            return None
        self.misses += 1
        recorder = _Recorder(core)
        self._renderer = recorder
        try:
            super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)
        finally:
            self._renderer = core
        if len(self.text_cache) >= MAX_ENTRIES:
            self.text_cache.clear()
        if not recorder.other and key not in self.text_cache:
            self.text_cache[key] = [(image, gx - x, gy - y, gangle) for image, gx, gy, gangle in recorder.glyphs]
        return None


class TextCachingCanvas(FigureCanvasAgg):
    """FigureCanvasAgg drawing with a ``TextCachingRenderer`` (kept while the size stays)."""

    def get_renderer(self):
        width, height = self.get_width_height(physical=True)
        key = (width, height, self.figure.dpi)
        if getattr(self, "_cache_key", None) != key:
            self.renderer = TextCachingRenderer(width, height, self.figure.dpi)
            self._cache_key = key
        return self.renderer
