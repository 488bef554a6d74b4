"""Paths the file system refuses outright, given to every option that reads or writes a file: a name too
long for the file system, a path through a regular file, a loop of symbolic links. One line each, the path
shortened in the message (the harness caps stderr at 2,000 characters)."""

from corpus.harness import Case

_LONG = "y" * 5000

_READERS = {
    "estimate": ["estimate", "PATH"],
    "plan-model": ["plan", "--model", "PATH", "--cluster", "dgx-h100", "--gpus", "8"],
    "plan-cluster": ["plan", "--model", "llama3.1-8b", "--cluster", "PATH", "--gpus", "8"],
    "tiers": ["tiers", "PATH"],
    "topo-prices": ["topo", "fat-tree", "--gpus", "128", "--prices", "PATH"],
    "validate-dataset": ["validate", "PATH"],
    "calibrate-input": ["calibrate", "PATH", "--out", "out.yaml"],
    "measure-ddp-calibration": ["measure", "ddp", "--calibration", "PATH"],
}
_WRITERS = {
    "calibrate-out": ["calibrate", "in.log", "--out", "PATH"],
    "validate-html": ["validate", "--html", "PATH"],
    "validate-fit-out": ["validate", "--fit", "--fit-out", "PATH"],
    "measure-collective-out": ["measure", "collective", "--out", "PATH"],
    "simulate-emit-cluster": ["simulate", "all-reduce", "--topology", "fat-tree", "--gpus", "64", "--radix", "16",
                              "--size", "1MB", "--emit-cluster", "PATH"],
}
_BAD = {
    "name-too-long": (_LONG + ".yaml", {}),
    "dir-too-long": (_LONG + "/x.yaml", {}),
    "through-a-file": ("afile/x.yaml", {"afile": "not a directory\n"}),
    "link-loop": ("loop.yaml", {"loop.yaml": "<symlink:loop.yaml>"}),
}
_IN_LOG = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20\n"
           "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
           "   busbw #wrong\n"
           "     1048576        262144     float     sum      -1    30.00   34.95   61.17      0    30.00   34.95"
           "   61.17      0\n")

CASES: list[Case] = []
for _group, _table in (("read", _READERS), ("write", _WRITERS)):
    for _tag, _argv in _table.items():
        for _bad, (_path, _files) in _BAD.items():
            if _bad == "link-loop" and _group == "write":
                continue  # writing over a link loop replaces the link: not an error
            files = dict(_files)
            if "in.log" in _argv:
                files["in.log"] = _IN_LOG
            CASES.append(Case(id=f"paths/{_group}-{_tag}-{_bad}", argv=[a.replace("PATH", _path) for a in _argv],
                              files=files, timeout_s=60))
