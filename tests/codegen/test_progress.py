"""Compile status and per-phase compile times (Note [Compile status] in progress.py)."""

import re

import numpy as np

import jitgrad as jg
from jitgrad.codegen import progress


def two_kernels(x):
    return (x.exp() * 2.0).sum(1), (x @ x.t()).tanh() + 1.0


def test_a_long_first_call_shows_one_status_line_on_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(progress, "STATUS_AFTER", 0.0)
    monkeypatch.setattr(progress, "_on_terminal", lambda: True)
    jg.reset()
    compiled = jg.compile(two_kernels)
    x = jg.tensor(np.ones((3, 4), np.float32))
    compiled(x)
    err = capsys.readouterr().err
    updates = re.findall(r"\rjitgrad: compiling forward_\d+ \(test_progress.py:12\): "
                         r"kernel (\d) of 2, \d+\.\d s", err)
    assert updates == ["1", "2", "2"] and err.endswith(" (done)\n"), repr(err)
    compiled(x)  # a cached call prints nothing
    assert capsys.readouterr().err == ""


def test_off_a_terminal_the_line_goes_to_the_log_channel(monkeypatch, capsys, caplog):
    monkeypatch.setattr(progress, "STATUS_AFTER", 0.0)
    monkeypatch.setattr(progress, "_on_terminal", lambda: False)
    jg.reset()
    with caplog.at_level("INFO", logger="jitgrad.compile_progress"):
        jg.compile(two_kernels)(jg.tensor(np.ones((3, 4), np.float32)))
    assert capsys.readouterr().err == ""
    [message] = [r.getMessage() for r in caplog.records if r.name == "jitgrad.compile_progress"]
    assert re.fullmatch(r"jitgrad: compiling forward_\d+ \(test_progress.py:12\): kernel 2 of "
                        r"2, \d+\.\d s \(done\)", message), message


def test_a_first_call_shorter_than_the_threshold_prints_nothing(monkeypatch, capsys):
    monkeypatch.setattr(progress, "STATUS_AFTER", 1e9)
    monkeypatch.setattr(progress, "_on_terminal", lambda: True)
    jg.reset()
    jg.compile(two_kernels)(jg.tensor(np.full((3, 4), 2.0, np.float32)))
    assert capsys.readouterr().err == ""


def test_explain_reports_each_compile_phase_in_pipeline_order():
    jg.reset()
    w = jg.tensor(np.ones(4, np.float32), requires_grad=True)
    report = jg.explain(lambda x: two_kernels(x * w)[0].sum())(jg.ones(3, 4))
    assert list(report.compile_times) and set(report.compile_times) == {
        "trace", "backend", "joint graph", "codegen", "guards", "numba"}
    assert all(seconds >= 0 for seconds in report.compile_times.values())
    line = str(report).splitlines()[-1]
    assert re.fullmatch(r"Compile time: trace [\d.]+ ms, backend [\d.]+ ms, joint graph "
                        r"[\d.]+ ms, codegen [\d.]+ ms, guards [\d.]+ ms, numba [\d.]+ ms", line)
