"""One error hierarchy, so the CLI can turn any failure into one readable line.

Every message should name the fix, not only the symptom.
"""


class SwizzlePerfError(Exception):
    """Base class: an expected failure with a message meant for the user."""


class HardwareSpecError(SwizzlePerfError):
    """A hardware spec file or preset name is invalid."""


class ContractError(SwizzlePerfError):
    """A kernel file does not follow the kernel contract (README: "The kernel contract")."""


class RemapRejected(SwizzlePerfError):
    """A remap candidate failed a check. `stage` says which one (static, bijectivity, ...)."""

    def __init__(self, stage: str, reason: str):
        super().__init__(f"{stage}: {reason}")
        self.stage = stage
        self.reason = reason


class SandboxError(SwizzlePerfError):
    """A child process crashed or ran past its time limit."""


class ChildSetupError(SandboxError):
    """A child process failed before it reached its work: the installation's fault, not the candidate's."""


class ProfilerError(SwizzlePerfError):
    """A profiler is missing, crashed, or produced output we cannot read."""


class TraceCaptureError(SwizzlePerfError):
    """The simulator could not capture a memory trace of the kernel."""


class CaptureTimedOut(TraceCaptureError):
    """A capture ran past its time limit and was killed."""


class RunError(SwizzlePerfError):
    """A run directory is missing, incomplete or from an incompatible version."""


class LibraryError(SwizzlePerfError):
    """A swizzle-library entry is missing, clashes, or does not fit the kernel it is applied to."""


class LLMError(SwizzlePerfError):
    """The language model is not configured, unreachable, or answered unusably."""

    usage = None  # LLMUsage of calls already billed before the failure, when there were any
    memory_analysis = None  # the analysis a failed proposal had already asked for, so it is kept
    llm_calls = ()  # LLMCall records of the requests made before the failure (timed-out ones included)


class ContextWindowError(SwizzlePerfError):
    """The prompt cannot fit the model's context window however it is shortened (found before any call)."""


class CaptureError(SwizzlePerfError):
    """A launch could not be captured, or a launch record read back is not one."""
