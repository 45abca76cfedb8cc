"""Model perf sweep: the batch size (or other parameter) with the highest steady TGS."""

from sweepd.kinds.model_perf import plan as perf_plan
from sweepd.kinds.model_perf import report
from sweepd.kinds.registry import Kind
from sweepd.kinds.spec import ModelPerfSpec

KIND = Kind("model-perf", ModelPerfSpec, perf_plan.plan, report.markdown, report.rows,
            plot=report.plot)
