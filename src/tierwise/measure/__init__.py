"""The measured rung of the fidelity ladder: nccl-tests logs, torch.distributed benchmarks, alpha-beta fits.

* :mod:`.nccl_log` parses nccl-tests output (and vendor busbw tables) into sweeps;
* :mod:`.fit` fits per-regime alpha-beta lines and defines the calibrated prediction rule;
* :mod:`.bench` runs collectives through ``torch.distributed`` (gloo on CPUs, NCCL on GPUs);
* :mod:`.ddp` measures a real DistributedDataParallel step and predicts its exposed communication;
* :mod:`.gpu` measures matmul throughput and HBM bandwidth on one GPU;
* :mod:`.calibrate` turns sweeps into a calibrated cluster YAML.

torch is optional (``pip install 'tierwise[measure]'``); only :mod:`.bench`, :mod:`.ddp` and :mod:`.gpu` need
it, and they import it inside their functions.
"""

from tierwise.measure.fit import Regime, RegimeFit, fit_regimes, out_of_sample, predict_time
from tierwise.measure.nccl_log import NcclRow, NcclSweep, parse_nccl_log, parse_nccl_text

__all__ = [
    "NcclRow",
    "NcclSweep",
    "Regime",
    "RegimeFit",
    "fit_regimes",
    "out_of_sample",
    "parse_nccl_log",
    "parse_nccl_text",
    "predict_time",
]
