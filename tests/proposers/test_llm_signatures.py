"""The two DSPy signatures: their typed fields, their order, and parsing through DSPy's chat adapter."""

import dspy
from dspy.utils.dummies import DummyLM

from swizzleperf.proposers.llm.client import ModelClient
from swizzleperf.proposers.llm.scripted_server import chat_reply
from swizzleperf.proposers.llm.signatures import MemoryAnalysis, ProposeSwizzle
from swizzleperf.records.proposal import LLMUsage

PROPOSE_INPUTS = dict(original_code="kernel", bottleneck_report="L2 hit 40%", memory_analysis="rows are shared",
                      history="iteration 1 ...", hardware="8 XCDs", goal="raise the hit rate", rules="a bijection")
PROPOSE_OUTPUTS = dict(reasoning="chunks of a row are split over XCDs",
                       critique={"iteration 1": "only marginally increased the L2 hit rate because rows stayed split"},
                       approach="My new swizzling approach will remap blocks by keeping each row on one XCD.",
                       why_better="It will be better than any prior implementation because no row is fetched twice.",
                       code="```python\n@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"
                            "    return pid\n```")


def test_propose_swizzle_outputs_come_in_the_methods_order():
    assert list(ProposeSwizzle.output_fields) == ["reasoning", "critique", "approach", "why_better", "code"]
    assert ProposeSwizzle.output_fields["critique"].annotation == dict[str, str]
    assert list(ProposeSwizzle.input_fields) == list(PROPOSE_INPUTS)


def test_memory_analysis_asks_for_no_code():
    assert list(MemoryAnalysis.input_fields) == ["kernel_source", "problem", "hardware"]
    assert list(MemoryAnalysis.output_fields) == ["access_pattern", "sharing"]
    assert "do not write code" in MemoryAnalysis.instructions.lower()


def test_propose_swizzle_round_trips_through_the_chat_adapter_with_a_dummy_lm():
    lm = DummyLM([PROPOSE_OUTPUTS])
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
        prediction = dspy.Predict(ProposeSwizzle)(**PROPOSE_INPUTS)
    assert {name: prediction[name] for name in PROPOSE_OUTPUTS} == PROPOSE_OUTPUTS
    prompt = lm.history[-1]["messages"][-1]["content"]
    assert "Respond with the corresponding output fields, starting with the field `[[ ## reasoning ## ]]`, then " \
           "`[[ ## critique ## ]]` (must be formatted as a valid Python dict[str, str]), then `[[ ## approach ## ]]`, " \
           "then `[[ ## why_better ## ]]`, then `[[ ## code ## ]]`" in prompt
    for name, value in PROPOSE_INPUTS.items():
        assert f"[[ ## {name} ## ]]\n{value}" in prompt


def test_the_scripted_servers_reply_format_is_what_dspy_parses():
    parsed = dspy.ChatAdapter().parse(ProposeSwizzle, chat_reply(**PROPOSE_OUTPUTS))
    assert parsed == PROPOSE_OUTPUTS


def test_model_client_works_with_any_dspy_lm_and_counts_calls():
    client = ModelClient(DummyLM([{"access_pattern": "each program reads one row", "sharing": "4 programs per row"}]))
    answer = client.predict(MemoryAnalysis, kernel_source="k", problem="p", hardware="h")
    assert answer.fields == {"access_pattern": "each program reads one row", "sharing": "4 programs per row"}
    assert answer.usage == LLMUsage(calls=1)  # DummyLM reports no tokens
