"""Code normalised for the copy check: what copying does not change compares equal, what code does stays."""
from course_utils.grading.reports.normalise import imported_names, statements

KNOWN = imported_names(["import torch\nfrom torch import nn\nimport torch.nn.functional as F\nimport math"])


def keys(source: str) -> list[str]:
    return [s.key for s in statements(source, KNOWN)]


def test_the_course_imports_are_known_names():
    assert {"torch", "nn", "F", "math"} <= KNOWN


def test_comments_type_hints_names_blank_lines_and_formatting_do_not_count():
    a = '''
def forward(ctx, input, weight, bias=None):
    ctx.save_for_backward(input, weight)
    output = input.mm(weight.t())
    return torch.sum(output, dim=1, keepdim=True)
'''
    b = '''
def forward(ctx, x: torch.Tensor, w: torch.Tensor, b: "torch.Tensor | None" = None) -> torch.Tensor:
    """Docstring."""
    # save what backward needs

    ctx.save_for_backward(x, w)  # both
    out: torch.Tensor = x.mm(w.t())
    return torch.sum(out, dim=1,
                     keepdim=True,)
'''
    assert keys(a) == keys(b) and len(keys(a)) == 4


def test_what_the_code_does_still_counts():
    assert keys("y = x.mm(w.t())") != keys("y = x.mm(w)")  # attributes
    assert keys("y = x.sum(dim=1)") != keys("y = x.sum(axis=1)")  # keyword arguments
    assert keys("y = torch.exp(x)") != keys("y = math.exp(x)")  # the course's imports
    assert keys("y = max(a, b)") != keys("y = min(a, b)")  # builtins called
    assert keys("y = 'a'") == keys('y = "a"') != keys("y = 'b'")  # strings, whatever their quotes


def test_statements_keep_their_lines_and_comments_as_written():
    (s,) = statements("out = torch.stack([a,\n                   b])  # pair\n", KNOWN)
    assert s.lines == ("out = torch.stack([a,", "b])  # pair") and s.comments == ("pair",)


def test_code_that_does_not_parse_is_read_line_by_line():
    found = keys("def f(x:\n    y = x + 1\nreturn y")
    assert "_ = _ + 1" in found and "return _" in found
    assert keys("x: int") == [] and keys("f = lambda x: x + 1") == ["_ = lambda _ : _ + 1"]


def test_strings_are_compared_without_ast(monkeypatch):
    """ast.literal_eval converts a tree outside policy.parse's lock: at --jobs 2 it raised SystemError (gh-106905)
    from the judge's thread and lost a row. Quoting still does not count, with no ast at all."""
    import ast

    def mismatch(*args, **kwargs):
        raise SystemError("AST constructor recursion depth mismatch (before=54, after=52)")
    monkeypatch.setattr(ast, "literal_eval", mismatch)
    from course_utils.grading.reports.normalise import statements
    single, double = statements("x = 'abc'\n", frozenset()), statements('y = """abc"""\n', frozenset())
    assert [s.key for s in single] == [s.key for s in double] != []
