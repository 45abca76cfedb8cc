"""Model perf sweep: the batch size (or other parameter) with the highest steady TGS."""

from sweepd.kinds.model_perf import plan as perf_plan
from sweepd.kinds.model_perf import report
from sweepd.kinds.model_perf.demo import DEMO
from sweepd.kinds.model_perf.spec import ModelPerfSpec
from sweepd.kinds.registry import Kind

KIND = Kind("model-perf", ModelPerfSpec, perf_plan.plan, report.markdown, report.rows,
            plot=report.plot, demo=DEMO)
