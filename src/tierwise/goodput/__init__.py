"""Goodput: failure rates x fault domains x checkpoints -> MTTI, checkpoint interval, ETTR, time-to-train.

Layer: above :mod:`tierwise.estimate` (step time and memory) and :mod:`tierwise.topology` (fabric part
counts); below the planner and the CLI. See docs/goodput.md for every formula and its source.
"""

from tierwise.goodput.interval import daly_ettr, daly_interval, daly_wall_time, young_interval
from tierwise.goodput.model import GoodputOptions, evaluate, failure_model, goodput, goodput_at
from tierwise.goodput.rates import GoodputError, load_rates
from tierwise.goodput.results import FailureModel, GoodputEstimate, GoodputEvaluation
from tierwise.goodput.simulate import simulate

__all__ = ["GoodputOptions", "GoodputError", "GoodputEstimate", "GoodputEvaluation", "FailureModel", "goodput",
           "goodput_at", "evaluate", "failure_model",
           "load_rates", "daly_interval", "young_interval", "daly_wall_time", "daly_ettr", "simulate"]
