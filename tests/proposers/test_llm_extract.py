"""Code extraction from model answers: what is kept, what is repaired, what is refused and why."""

import ast
from pathlib import Path

import pytest

from swizzleperf.kernel.contract import HookSignature
from swizzleperf.proposers.llm.extract import code_blocks, extract_hook, split_fields
from swizzleperf.remaps.check import static_check

HOOK = HookSignature(name="swizzle", pid="pid", grid_params=("num_pids",), constexprs=("NUM_XCDS",))
HOOK_2D = HookSignature(name="swizzle", pid="pid", grid_params=("num_pid_m", "num_pid_n"), constexprs=("NUM_XCDS",))

GOOD = '''@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    # keep the chunks of one row on one XCD
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    q = tl.cdiv(num_pids, NUM_XCDS)
    tall = num_pids - (q - 1) * NUM_XCDS
    if xcd < tall:
        lid = xcd * q + local
    else:
        lid = tall * q + (xcd - tall) * (q - 1) + local
    return lid
'''


def fenced(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}```"


def body_names(source: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}


# --- the happy paths -------------------------------------------------------------------------

def test_fenced_code_with_chatty_text_is_kept_verbatim_with_comments():
    answer = f"Sure! Here is my remap:\n\n{fenced(GOOD)}\n\nThis should raise the hit rate. Let me know!"
    result = extract_hook(answer, HOOK)
    assert result.ok and result.source == GOOD
    assert result.notes == ()
    static_check(result.source, HOOK)  # what the loop's first check will do


def test_unfenced_code_inside_prose_is_found_and_noted():
    answer = f"The idea is to group rows.\n{GOOD}\nThat is all: it handles the remainder too."
    result = extract_hook(answer, HOOK)
    assert result.source == GOOD
    assert result.notes == ("the code was not in a fenced block",)


def test_whole_kernel_file_yields_only_the_hook():
    kernel_file = Path(__file__).resolve().parents[2] / "kernels" / "softmax.py"
    text = kernel_file.read_text().replace('''    """Launch-order program id -> logical program id (a bijection on [0, num_pids))."""
    return pid
''', GOOD.split(":\n", 1)[1])
    result = extract_hook(fenced(text), HOOK)
    assert result.ok, result.error
    assert result.source == GOOD
    assert "softmax_kernel" not in result.source


def test_the_last_block_wins_over_a_quoted_original():
    original = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return pid\n"
    answer = f"The original is\n{fenced(original)}\nand my new one is\n{fenced(GOOD)}"
    assert extract_hook(answer, HOOK).source == GOOD


def test_a_broken_final_block_is_reported_not_replaced_by_the_quoted_original():
    original = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return pid\n"
    broken = GOOD.replace("if xcd < tall:", "if xcd < tall")
    result = extract_hook(f"The original is\n{fenced(original)}\nMine:\n{fenced(broken)}", HOOK)
    assert result.source == "" and "does not parse (line 8: expected ':')" in result.error


def test_prose_with_code_like_lines_finds_the_function_among_them():
    prose = "\n".join(["from the analysis it follows that rows are shared.",
                       "def initely the chunks should stay together, see below:",
                       "@everyone this matters"] * 200)
    kernel_after = "def softmax_kernel(x_ptr, y_ptr):\n    pid = swizzle(tl.program_id(0), 8, 8)\n"
    result = extract_hook(f"{prose}\n{GOOD}\nAnd the kernel stays:\n{kernel_after}\nThanks.", HOOK)
    assert result.source == GOOD


def test_unclosed_fence_of_a_truncated_answer_still_counts():
    assert extract_hook("```python\n" + GOOD, HOOK).source == GOOD


def test_blocks_in_other_languages_are_ignored():
    blocks = code_blocks(f"{fenced('int main() {}', 'cpp')}\n{fenced(GOOD, 'py')}\n{fenced('x = 1', '')}")
    assert [b.text.strip() for b in blocks] == [GOOD.strip(), "x = 1"]


def test_2d_hook_keeps_its_tuple_return():
    code = ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr):\n"
            "    return pid % num_pid_m, pid // num_pid_m\n")
    assert extract_hook(fenced(code), HOOK_2D).source == code


# --- unambiguous repairs, each written down ---------------------------------------------------

def test_function_with_another_name_is_renamed_keeping_comments():
    result = extract_hook(fenced(GOOD.replace("def swizzle(", "def remap_xcd(")), HOOK)
    assert result.source == GOOD
    assert result.notes == ("renamed function remap_xcd() to swizzle()",)


def test_renamed_parameters_are_mapped_by_position_and_reported():
    code = GOOD.replace("pid", "program_id").replace("num_program_ids", "n").replace("num_programs", "n")
    code = code.replace("num_pids", "n").replace("NUM_XCDS", "DIES")
    result = extract_hook(fenced(code), HOOK)
    assert result.ok, result.error
    fn = static_check(result.source, HOOK)
    assert [a.arg for a in fn.args.args] == ["pid", "num_pids", "NUM_XCDS"]
    assert {"program_id", "n", "DIES"}.isdisjoint(body_names(result.source))
    assert ast.dump(ast.parse(result.source)) == ast.dump(ast.parse(GOOD))  # same program, comments aside
    assert "renamed parameters program_id -> pid, n -> num_pids, DIES -> NUM_XCDS (by position)" in result.notes[0]


def test_annotations_and_decorators_are_made_exactly_the_hooks():
    code = ("@triton.jit(noinline=True)\n"
            "def swizzle(pid: int, num_pids: tl.int32, NUM_XCDS) -> int:\n"
            "    return (pid % NUM_XCDS) * (num_pids // NUM_XCDS) + pid // NUM_XCDS\n")
    result = extract_hook(fenced(code), HOOK)
    static_check(result.source, HOOK)
    assert result.source.startswith("@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):")
    assert set(result.notes) == {
        "removed the annotation int of pid (the hook takes it unannotated)",
        "removed the annotation tl.int32 of num_pids (the hook takes it unannotated)",
        "annotated NUM_XCDS as tl.constexpr",
        "removed the return annotation int",
        "replaced the decorators @triton.jit(noinline=True) with @triton.jit",
        "rewrote the function from its syntax tree (comments are not kept)",
    }


def test_missing_decorator_is_added():
    result = extract_hook(fenced(GOOD.replace("@triton.jit\n", "")), HOOK)
    assert "added the @triton.jit decorator" in result.notes
    static_check(result.source, HOOK)


# --- refusals, with a reason the model can act on ---------------------------------------------

@pytest.mark.parametrize("answer, reason", [
    ("", "the answer contained no code"),
    ("I am sorry, I cannot propose a better remap for this kernel.", "no Python function was found"),
    (fenced("def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return pid +\n"),
     "does not parse (line 2: invalid syntax)"),
    (fenced("@triton.jit\ndef swizzle(num_pids, pid, NUM_XCDS: tl.constexpr):\n    return pid\n"),
     "are not in the hook's order"),
    (fenced("@triton.jit\ndef swizzle(p, n, NUM_XCDS: tl.constexpr):\n    pid = p\n    return pid\n"),
     "its body already uses pid"),
    (fenced("@triton.jit\ndef swizzle(pid, NUM_XCDS: tl.constexpr):\n    return pid\n"),
     "takes (pid, NUM_XCDS) but the hook's signature is `def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr)`"),
    (fenced("@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr=8):\n    return pid\n"),
     "without defaults"),
    (fenced("def helper(a, b):\n    return a\n\n@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"
            "    return helper(pid, num_pids)\n"), "calls helper() defined outside it"),
    (fenced("def a(x, y, z):\n    return x\n\ndef b(x, y, z):\n    return y\n"),
     "several functions in the answer (a(), b()) could be the remap function"),
])
def test_unusable_answers_give_a_reason_and_no_source(answer, reason):
    result = extract_hook(answer, HOOK)
    assert result.source == "" and not result.ok
    assert reason in result.error
    assert result.error.endswith("Answer with the complete remap function `@triton.jit def swizzle(pid, num_pids, "
                                 "NUM_XCDS: tl.constexpr)` in a ```python block in the code field.")


def test_extraction_never_executes_the_answer(tmp_path):
    marker = tmp_path / "executed"
    payload = f"open({str(marker)!r}, 'w').write('x')\nimport os\nos.remove({str(marker)!r})\n"
    result = extract_hook(fenced(payload + "\n" + GOOD), HOOK)
    assert result.source == GOOD
    assert not marker.exists()


# --- answer fields outside DSPy's strict format ----------------------------------------------

def test_split_fields_reads_the_sections_that_are_there():
    text = ("[[ ## reasoning ## ]]\nrows are shared\n\n[[##critique##]] {\"iteration 1\": oops\n"
            "[[ ## code ## ]]\n```python\nx\n```\n[[ ## code ## ]]\nsecond copy ignored\n[[ ## completed ## ]]\n")
    assert split_fields(text, ["reasoning", "critique", "approach", "code"]) == {
        "reasoning": "rows are shared", "critique": '{"iteration 1": oops', "code": "```python\nx\n```"}
