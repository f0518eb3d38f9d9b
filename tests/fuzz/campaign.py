"""Check one program on every backend, shrink a failure, save it for reproduction.

`check(program, backends)` returns the mismatches as `{backend: (call index, [(kind,
detail)...])}`; a backend's label is `backend:kind` of its first mismatch, or
`backend:fallback` when its values match but a compile fell back to eager after an error
of jitgrad's own (`runner.FALLBACKS`). `shrink`
deletes statements, returned values and calls while the label persists and eager still
runs (a deleted definition makes eager raise NameError: that candidate is rejected).
`save` writes the original and shrunk program, its inputs and a report under
`<out>/<label>/seed_<seed>/`; `python -m tests.fuzz --replay <that dir>` re-runs it.
"""

import dataclasses
import os
import pickle

from tests.fuzz import compare, runner
from tests.fuzz.generator import Program, render


def check(program: Program, backends, torch_worker=None) -> dict:
    """{backend: (call index, mismatches)} for every backend that differs from eager."""
    results = runner.run_all(program, backends, torch_worker)
    ref, found = results["eager"], {}
    for backend in backends:
        got = results.get(backend)
        if got is None:
            continue
        if backend in ("numpy", "torch"):
            keep = [i for i, r in enumerate(ref) if "raise" not in r or backend == "torch"]
            ref_b, got_b = [ref[i] for i in keep], [got[i] for i in keep]
            exact = results.get("numpy") if backend == "torch" else None
            diff = compare.compare(program, ref_b, got_b, typed=backend == "torch",
                                   other_rounding=backend == "torch",
                                   exact_results=None if exact is None else [
                                       exact[i] for i in keep])
            if diff is not None:
                diff = (keep[diff[0]], diff[1])
        else:
            diff = compare.compare(program, ref, got, sink=True,
                                   exact_results=results.get("numpy"))
            if diff is not None and any(kind == "grad_value" for kind, _ in diff[1]):
                diff = compare.compare(program, ref, got, sink=True,
                                       exact_results=float64_references(program, results))
        if diff is None and backend in runner.JITGRAD_BACKENDS:
            diff = next(((i, [("fallback", r["fallback"])]) for i, r in enumerate(got)
                         if "fallback" in r), None)
        if diff is not None:
            found[backend] = diff
    return found


def float64_references(program: Program, results: dict) -> list[dict] | None:
    """Per call, the float64 references of `compare.compare_call`: the numpy translation's
    outputs and the gradients of eager jitgrad's run of the widened program (None when
    the program has neither)."""
    wide = runner.widened(program)
    numpy_results = results.get("numpy")
    if wide is None:
        return numpy_results
    wide_results = runner.run_jitgrad(wide, "eager")
    out = []
    for i, w in enumerate(wide_results):
        exact = dict(numpy_results[i]) if numpy_results is not None and \
            "raise" not in numpy_results[i] else {}
        if "grads" in w and "raise" not in w:
            exact["grads"] = w["grads"]
        out.append(exact)
    return out


def label_of(backend: str, diff) -> str:
    return f"{backend}:{diff[1][0][0]}"


def variant(program: Program, keep: list[int], returns: list[str], calls: list) -> Program:
    statements = [program.statements[i] for i in keep]
    numpy_statements = None if program.numpy_statements is None else [
        program.numpy_statements[i] for i in keep]
    return dataclasses.replace(
        program, statements=statements, numpy_statements=numpy_statements, returns=returns,
        calls=calls, source=render(program.params, statements, returns),
        numpy_source=None if numpy_statements is None else render(program.params,
                                                                  numpy_statements, returns))


def still_fails(candidate: Program, backend: str, label: str, torch_worker) -> bool:
    eager = runner.run_jitgrad(candidate, "eager")
    if any(r.get("raise") in ("NameError", "UnboundLocalError") for r in eager):
        return False
    found = check(candidate, [backend], torch_worker)
    return backend in found and label_of(backend, found[backend]) == label


def shrink(program: Program, backend: str, label: str, call_index: int, torch_worker=None,
           budget: int = 60) -> Program:
    """Delete calls, statements and returns while `label` persists: passes until none
    succeeds or `budget` runs are spent."""
    best = variant(program, list(range(len(program.statements))), list(program.returns),
                   program.calls[:call_index + 1])
    keep = list(range(len(best.statements)))
    progress = True
    while progress and budget > 0:
        progress = False
        for calls, kept, returns in candidates(best, keep):
            if budget <= 0:
                break
            budget -= 1
            candidate = variant(program, kept, returns, calls)
            if still_fails(candidate, backend, label, torch_worker):
                best, keep, progress = candidate, kept, True
                break
    return best


def candidates(best: Program, keep: list[int]):
    """One-step reductions of `best`: drop the first call, a statement, or a return."""
    if len(best.calls) > 1:
        yield best.calls[1:], keep, best.returns
    for i in reversed(keep):
        yield best.calls, [k for k in keep if k != i], best.returns
    if len(best.returns) > 1:
        for r in best.returns:
            yield best.calls, keep, [x for x in best.returns if x != r]


def save(out_dir: str, label: str, program: Program, shrunk: Program, details) -> str:
    path = os.path.join(out_dir, label.replace(":", "-"), f"seed_{program.seed}")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "program.py"), "w") as f:
        f.write(program.source)
    with open(os.path.join(path, "shrunk.py"), "w") as f:
        f.write(shrunk.source)
    with open(os.path.join(path, "programs.pkl"), "wb") as f:
        pickle.dump({"original": program, "shrunk": shrunk}, f)
    with open(os.path.join(path, "report.txt"), "w") as f:
        f.write(f"label {label}\nseed {program.seed}\nfeatures {sorted(program.used)}\n")
        f.write(f"call {details[0]}\n" + "".join(f"  {k}: {d}\n" for k, d in details[1]))
    return path
