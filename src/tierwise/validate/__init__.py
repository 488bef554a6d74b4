"""``tierwise validate``: the estimator against published, measured training runs.

Map each row of a calibration CSV to a scenario (:mod:`.mapping`), turn the source's own metric into tokens/s
per GPU by the source's own FLOP rule (:mod:`.rules`), estimate every row (:mod:`.run`), summarize the errors,
fit the global compute parameters (:mod:`.fit`), and write the HTML report (:mod:`.report`).
"""

from __future__ import annotations

from pathlib import Path

from tierwise.atomic import check_writable
from tierwise.estimate.compute import compute_params
from tierwise.specs.compute import unmeasured
from tierwise.specs.parameters import load_parameters, parameters_file
from tierwise.validate.dataset import DatasetError, default_dataset_path, load_rows
from tierwise.validate.fit import cross_validate as loso
from tierwise.validate.fit import cross_validate_groups, fit_parameters, write_parameters
from tierwise.validate.mapping import Case, case_from_row
from tierwise.validate.run import Validation, load_cases, row_records, validate, worst_rows

__all__ = ["DatasetError", "Case", "Validation", "case_from_row", "default_dataset_path", "load_rows", "load_cases",
           "validate", "row_records", "worst_rows", "validation_document"]


def validation_document(path: str | Path | None = None, *, source: str | None = None,
                        cross_validate: bool = False, fit: bool = False, fit_out: str | Path | None = None) -> dict:
    """The ``tierwise validate --json`` document.

    ``fit`` refits the global compute parameters on the dataset's high/medium-confidence rows (all sources,
    even when ``source`` narrows the report), writes a parameters file to ``fit_out`` (required: the
    installed ``catalog/parameters.yaml`` is never written) and validates with it; ``cross_validate`` adds
    leave-one-(hardware x software-stack)-out figures (``cross_validation_groups``, the headline) and
    leave-one-source-out ones (``cross_validation``).
    """
    if fit:

        if fit_out is None:
            write_parameters({}, "", out=None)  # raises the one-line error naming --fit-out
        check_writable(fit_out, "--fit-out")

        doc = _document(path, source, cross_validate, fit_out, load_parameters())
        return _finish(doc, path, source, cross_validate, parameters_file(fit_out))  # validated with the fit
    parameters = load_parameters()
    return _finish(_document(path, source, cross_validate, None, parameters), path, source, cross_validate, parameters)


def _document(path, source, cross_validate, fit_out, parameters) -> dict:

    doc: dict = {"dataset": str(path or default_dataset_path()), "_cases": None}
    all_cases = load_cases(path, parameters=parameters)
    if source is not None:
        load_cases(path, source, parameters=parameters)  # validates the name (one clear error for an unknown source)
    doc["_cases"] = all_cases
    if fit_out is not None:
        from datetime import date

        before = {k: float(v) for k, v in compute_params(parameters).items() if isinstance(v, int | float)}
        params, info = fit_parameters(all_cases, parameters=parameters)
        note = (f"fitted {date.today().isoformat()} by tierwise validate --fit on {info['rows']} high/medium-"
                f"confidence rows of {Path(doc['dataset']).name}: {info['method']}; {info['evaluations']} "
                f"iterations ({info['jacobians']} finite-difference Jacobians); see docs/validation.md")
        written = write_parameters(params, note, out=fit_out)
        doc["fit"] = {"parameters": params, "before": {k: before.get(k) for k in params}, "written_to": written,
                      **info}
    return doc


def _finish(doc: dict, path, source, cross_validate, parameters) -> dict:

    all_cases = doc.pop("_cases")
    cases = [c for c in all_cases if source is None or c.source_id == source]
    v = validate(cases=cases, parameters=parameters)
    doc["parameters"] = {k: v_ for k, v_ in compute_params(parameters).items() if isinstance(v_, int | float)}

    # catalog accelerators without their own large-GEMM / HBM microbenchmark, and the figure each uses instead
    doc["compute_fallbacks"] = unmeasured()
    doc["summary"] = v.summary
    doc["rows"] = row_records(v)
    doc["worst_rows"] = [{k: r[k] for k in ("row_id", "source_id", "model", "plan", "error_pct", "dominant_term",
                                            "dominant_share")} for r in worst_rows(v)]
    if cross_validate:

        # the headline: leave-one-(hardware x software-stack)-out; leave-one-source-out is secondary
        doc["cross_validation_groups"] = cross_validate_groups(all_cases, parameters=parameters)
        doc["cross_validation"] = loso(all_cases, parameters=parameters)
    return doc
