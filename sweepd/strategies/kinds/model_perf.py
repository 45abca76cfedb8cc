"""Model perf sweep: the batch size (or other parameter) with the highest steady TGS."""

from sweepd.reports import model_perf as report
from sweepd.specs import ModelPerfSpec
from sweepd.strategies import perf_plan
from sweepd.strategies.registry import Kind

KIND = Kind("model-perf", ModelPerfSpec, perf_plan.plan, report.markdown, report.rows,
            plot=report.plot)
