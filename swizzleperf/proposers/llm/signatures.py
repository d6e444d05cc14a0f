"""The two model calls of the method, as typed DSPy signatures.

`MemoryAnalysis` runs once per run: the model reads the kernel and says which programs share
which data, without writing code. `ProposeSwizzle` runs once per iteration; its outputs come
in a fixed order so the model reasons, judges every earlier attempt, commits to an approach
and argues for it before it writes the code.
"""

from __future__ import annotations

import dspy


class MemoryAnalysis(dspy.Signature):
    """Analyse the memory access pattern of a Triton kernel whose program ids can be remapped.

    Explain which programs read the same data, so that a later step can decide which programs
    should run on the same die and at about the same time. Describe; do not write code."""

    kernel_source: str = dspy.InputField(desc="the complete Triton kernel file, including its remap function")
    problem: str = dspy.InputField(desc="how the kernel is launched: grid sizes and the remap function's signature")
    hardware: str = dspy.InputField(desc="the GPU the kernel runs on")

    access_pattern: str = dspy.OutputField(
        desc="what one program loads and stores, in which order, and how much (bytes per program), as a "
             "function of its logical program id")
    sharing: str = dspy.OutputField(
        desc="which logical program ids read the same data (e.g. 'the CHUNKS programs of one row'), how many "
             "programs share each piece, and how large the shared piece is; no code")


class ProposeSwizzle(dspy.Signature):
    """Propose a new remap function (a swizzle of program ids) for a Triton kernel.

    Reason about the memory analysis, the bottleneck report, the hardware and every earlier
    attempt, then write a remap that raises the L2 hit rate and differs from all earlier
    attempts. Follow the rules on the remap function's shape exactly."""

    original_code: str = dspy.InputField(desc="the original kernel file; only its remap function may change")
    bottleneck_report: str = dspy.InputField(desc="the profile of the original kernel")
    memory_analysis: str = dspy.InputField(desc="which programs share which data, from an earlier analysis")
    history: str = dspy.InputField(desc="earlier attempts: each one's change and outcome, failures with reasons")
    hardware: str = dspy.InputField(desc="the GPU the kernel runs on")
    goal: str = dspy.InputField()
    rules: str = dspy.InputField(desc="the shape the remap function must have and the Triton subset it may use")

    reasoning: str = dspy.OutputField(desc="think step by step about where the L2 misses come from")
    critique: dict[str, str] = dspy.OutputField(
        desc='a JSON object with one entry per earlier attempt shown in the history, keyed "iteration N", saying '
             'why it was suboptimal, e.g. {"iteration 1": "only marginally increased the L2 hit rate because ..."}; '
             '{} when there is no earlier attempt')
    approach: str = dspy.OutputField(desc='one sentence: "My new swizzling approach will remap blocks by ..."')
    why_better: str = dspy.OutputField(
        desc='one sentence: "It will be better than any prior implementation because ..."')
    code: str = dspy.OutputField(desc="the complete new remap function only, in a ```python block")
