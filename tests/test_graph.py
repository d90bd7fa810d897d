"""course_utils.graph: deterministic DOT, custom nodes marked, text fallback, clear errors."""
import contextlib
import io
import subprocess
import sys
import textwrap

import pytest
import torch

from course_utils import graph
from course_utils.errors import CourseError


class Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a


def leaves():
    torch.manual_seed(0)
    return torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)


SCRIPT = textwrap.dedent(
    """
    import torch, sys
    sys.path.insert(0, {root!r})
    from course_utils import graph
    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b); return a * b
        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors; return g * b, g * a
    junk = [torch.randn(5) for _ in range({junk})]  # shift memory addresses between runs
    a = torch.randn(3, requires_grad=True); b = torch.randn(3, requires_grad=True)
    y = (Mul.apply(a, b).exp() * a).sum()
    print(graph.backward_graph(y, {{"a": a, "b": b}}, show_saved=True).source)
    """
)


def test_dot_source_is_byte_identical_across_processes(root):
    """The same script in a fresh process and in this one (another process, its memory laid out by every module and
    test before; the fresh one's shifted by junk tensors): one interpreter start instead of two."""
    fresh = subprocess.run([sys.executable, "-c", SCRIPT.format(root=str(root), junk=37)],
                           capture_output=True, text=True, check=True).stdout
    here = io.StringIO()
    with torch.random.fork_rng(), contextlib.redirect_stdout(here):  # the worker's global RNG left as it was
        exec(compile(SCRIPT.format(root=str(root), junk=0), "<graph script>", "exec"), {})
    assert fresh == here.getvalue()
    assert "n0" in fresh and "0x" not in fresh


def test_node_names_are_sequential_not_addresses():
    a, b = leaves()
    src = graph.backward_graph((a * b).sum()).source
    assert str(id(a)) not in src
    for token in ("n0 ", "n1 ", "n2 "):
        assert f"\t{token}" in src


def test_custom_function_nodes_are_marked():
    a, b = leaves()
    src = graph.backward_graph(Mul.apply(a, b).sum(), {"a": a, "b": b}).source
    assert 'label="MulBackward\\n(custom Function)"' in src
    assert graph.CUSTOM_FILL in src
    native = graph.backward_graph((a * b).sum()).source
    assert "custom Function" not in native and graph.CUSTOM_FILL not in native


def test_show_saved_is_optional_for_custom_and_builtin_nodes():
    a, b = leaves()
    y = Mul.apply(a, b).exp().sum()
    plain = graph.backward_graph(y).source
    saved = graph.backward_graph(y, show_saved=True).source
    assert "orange" not in plain and "dir=none" not in plain
    assert saved.count("fillcolor=orange") >= 3  # Mul's a and b, Exp's result
    text = graph.graph_text(y, show_saved=True)
    assert "saved: saved[0] (3,), saved[1] (3,)" in text
    assert "ExpBackward0  saved: result (3,)" in text


def test_params_name_leaves():
    a, b = leaves()
    src = graph.backward_graph(a * b, {"alpha": a, "beta": b}).source
    assert "alpha" in src and "beta" in src


def test_graph_text_shows_shared_nodes_once():
    x = torch.tensor(2.0, requires_grad=True)
    y = torch.tensor(3.0, requires_grad=True)
    text = graph.graph_text(x * y + torch.sin(x), {"x1": x, "x2": y})
    assert text.splitlines() == [
        "output scalar",
        "  AddBackward0",
        "  ├─ MulBackward0",
        "  │  ├─ AccumulateGrad -> leaf x1 scalar",
        "  │  └─ AccumulateGrad -> leaf x2 scalar",
        "  └─ SinBackward0",
        "     └─ AccumulateGrad  (shared, see above)",
    ]


def test_draw_gives_svg_when_dot_exists():
    if not graph.dot_available():
        pytest.skip("needs Graphviz")
    a, b = leaves()
    view = graph.draw(Mul.apply(a, b).sum(), {"a": a, "b": b})
    svg = view._repr_svg_()
    assert svg.lstrip().startswith("<?xml") and "MulBackward" in svg and "custom Function" in svg


def test_compare_puts_two_graphs_side_by_side():
    if not graph.dot_available():
        pytest.skip("needs Graphviz")
    a, b = leaves()
    both = graph.compare(a * b, Mul.apply(a, b), titles=("native", "mine"))
    page = both._repr_html_()
    assert page.count("<svg") == 2 and "<b>native</b>" in page and "<b>mine</b>" in page
    assert "== native ==" in repr(both) and "== mine ==" in repr(both)


def test_text_fallback_without_dot(monkeypatch):
    monkeypatch.setattr(graph.shutil, "which", lambda name: None)
    a, b = leaves()
    view = graph.draw(Mul.apply(a, b).sum(), {"a": a, "b": b}, title="custom")
    assert view._repr_svg_() is None  # IPython then shows text/plain
    shown = repr(view)
    assert "MulBackward  [custom Function]" in shown
    assert "AccumulateGrad -> leaf a (3,)" in shown
    assert shown.rstrip().endswith(graph.INSTALL_HINT) and shown.count("\n" + graph.INSTALL_HINT) == 1
    both = graph.compare(a * b, Mul.apply(a, b))
    assert both._repr_html_() is None and graph.INSTALL_HINT in repr(both)


def test_text_fallback_when_dot_missing_from_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    a, b = leaves()
    assert not graph.dot_available()
    assert graph.draw(a * b)._repr_svg_() is None


@pytest.mark.parametrize(
    "bad, words",
    [
        (3, "got a int"),
        ((), "empty tuple"),
        ([], "empty list"),
        (torch.randn(2), "no grad_fn"),
        (torch.randn(2, requires_grad=True), "leaf tensor of shape (2,)"),
        ((torch.randn(2, requires_grad=True) * 2, "x"), "got a str"),
    ],
)
def test_bad_input_gets_one_clear_sentence(bad, words):
    with pytest.raises(CourseError) as info:
        graph.draw(bad)
    message = str(info.value)
    assert words in message
    assert message.count(". ") == 0 and message.endswith(".")
    assert info.value._render_traceback_() == [f"CourseError: {message}"]


def test_bad_params_and_titles():
    a, b = leaves()
    with pytest.raises(CourseError, match="dict of name -> tensor"):
        graph.draw(a * b, params={"a": 1})
    with pytest.raises(CourseError, match="pair of strings"):
        graph.compare(a * b, a * b, titles=("only one",))


def test_freed_graph_is_explained():
    a, b = leaves()
    y = Mul.apply(a, b).sum()
    y.backward()
    with pytest.raises(CourseError, match=r"already freed by \.backward"):
        graph.draw(y, show_saved=True)
