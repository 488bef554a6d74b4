"""Hostile files (issue 12, class 3): every command that reads a file, given a directory, a FIFO, a device, an
endless or system file, a dangling link, an empty, binary, UTF-16 or Latin-1 file, a non-mapping, duplicate keys,
an alias bomb, a huge file; mistyped or impossible Hugging Face fields; Megatron/NeMo plan names. One line each,
exit 2, nothing echoed; in a batch ``estimate`` the good files still get their results."""

from __future__ import annotations

import json
from pathlib import Path

from corpus.harness import Case, Result

_REPO = Path(__file__).resolve().parents[2]
_LOG = (_REPO / "tests" / "data" / "nccl-logs" / "h100x8_1node_nvswitch_allreduce_nccl2.24.3_voltagepark.log")
GOOD_LOG = _LOG.read_text(encoding="utf-8") if _LOG.exists() else ""
HF_LLAMA = json.loads((_REPO / "tests" / "data" / "hf" / "Llama-3.1-8B.config.json").read_text(encoding="utf-8"))

GOOD_SCENARIO = ("model: llama3.1-8b\ncluster: dgx-h100\nnum_gpus: 8\n"
                 "plan: {tp: 8, global_batch_size: 8, seq_length: 2048}\n")


def _scenario(model: str = "llama3.1-8b", cluster: str = "dgx-h100", plan: str = "") -> str:
    plan = plan or "{tp: 8, global_batch_size: 8, seq_length: 2048}"
    return f"model: {model}\ncluster: {cluster}\nnum_gpus: 8\nplan: {plan}\n"


_BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 25))

# name -> (file content or special marker, substrings stderr must hold); the bad file is always "bad.yaml"
_CONTENTS: dict[str, tuple[str | bytes | None, tuple[str, ...]]] = {
    "directory": (None, ("directory",)),
    "fifo": ("<fifo>", ("named pipe",)),
    "dangling-symlink": ("<symlink:no-such-target.yaml>", ("symbolic link",)),
    "empty": ("", ("empty",)),
    "only-comments": ("# nothing here\n\n", ("empty",)),
    "nul-bytes": (b"a: 1\n\x00\x01\x02\x03", ("nul byte",)),
    "utf16": ("a: 1\n".encode("utf-16"), ("utf-16",)),
    "latin1": (b"a: caf\xe9\n", ("not utf-8", "offset 6")),
    "list": ("- 1\n- 2\n", ("list",)),
    "scalar": ("just words\n", ("string",)),
    "duplicate-key": ("a: 1\nb: 2\na: 3\n", ("duplicate key 'a'", "line 3")),
    "alias-bomb": (_BOMB, ("aliases",)),
    "huge": ("<sparse:17000000>", ("limit",)),
    "syntax": ("a: [1, 2\nb: {c\n", ("malformed yaml",)),
    "deep-nesting": ("a: " + "[" * 20000 + "]" * 20000 + "\n", ("malformed yaml",)),
}
# absolute paths that are not files a user means: (path, substrings stderr must hold)
_SYSTEM = {
    "dev-zero": ("/dev/zero", ("character device",)),
    "dev-urandom": ("/dev/urandom", ("character device",)),
    "proc-environ": ("/proc/self/environ", ("nul byte",)),
    "root-dir": ("/", ("directory",)),
}


def _no_environment(result: Result) -> None:
    """A system file's contents never reach the output (the environment holds secrets)."""
    for needle in ("PATH=", "HOME=", "COLUMNS="):
        assert needle not in result.stderr and needle not in result.stdout, f"{needle} echoed"


# family -> (argv with {f} for the bad path, extra files, takes the generic YAML contents, takes system paths)
_FAMILIES: dict[str, tuple[list[str], dict[str, str], bool, bool]] = {
    "estimate": (["estimate", "{f}"], {}, True, True),
    "estimate-model": (["estimate", "s.yaml"], {"s.yaml": _scenario(model="bad.yaml")}, True, False),
    "estimate-cluster": (["estimate", "s.yaml"], {"s.yaml": _scenario(cluster="bad.yaml")}, True, False),
    "plan-model": (["plan", "--model", "{f}", "--cluster", "dgx-h100", "--gpus", "8"], {}, True, False),
    "plan-cluster": (["plan", "--model", "llama3.1-8b", "--cluster", "{f}", "--gpus", "8"], {}, True, True),
    "tiers": (["tiers", "{f}"], {}, True, True),
    "collective-cluster": (["collective", "all-reduce", "--size", "1GB", "--ranks", "8", "--cluster", "{f}"], {},
                           True, False),
    "topo-prices": (["topo", "fat-tree", "--gpus", "64", "--radix", "16", "--prices", "{f}"], {}, True, True),
    "topo-file": (["topo", "{f}"], {}, True, False),
    "simulate-topology": (["simulate", "all-reduce", "--topology", "{f}", "--size", "1MB"], {}, True, False),
    "calibrate-cluster": (["calibrate", "good.log", "--cluster", "{f}", "--out", "out.yaml"],
                          {"good.log": GOOD_LOG}, True, False),
}
# the scenario reader gets every content; the other readers share its code after the path, so they get a
# subset (each case is a process start: the corpus has to stay quick)
_SUBSET = {"directory", "fifo", "empty", "latin1", "list", "duplicate-key", "alias-bomb"}
_ONLY = {fam: _SUBSET for fam in _FAMILIES if fam != "estimate"}
_ONLY["topo-prices"] = set(_CONTENTS) - {"only-comments", "deep-nesting"}  # its own reader and error class
_ONLY["simulate-topology"] = {"directory", "list", "duplicate-key"}  # the topology reader topo-file covers

CASES: list[Case] = []

for _fam, (_argv, _extra, _generic, _system) in _FAMILIES.items():
    if _generic:
        for _name, (_content, _has) in _CONTENTS.items():
            if _name not in _ONLY.get(_fam, _CONTENTS):
                continue
            _files: dict[str, str | bytes] = dict(_extra)
            if _content is None:
                _files["bad.yaml/"] = ""
            else:
                _files["bad.yaml"] = _content
            CASES.append(Case(id=f"files/{_fam}-{_name}", argv=[a.replace("{f}", "bad.yaml") for a in _argv],
                              files=_files, stderr_has=_has, timeout_s=60.0))
    if _system:
        for _name, (_path, _has) in _SYSTEM.items():
            CASES.append(Case(id=f"files/{_fam}-{_name}", argv=[a.replace("{f}", _path) for a in _argv],
                              files=dict(_extra), stderr_has=_has, check=_no_environment))

# --- logs (calibrate) and datasets (validate): the same reader, other limits --------------------------------

_RAW = {
    "directory": (None, ("directory",)),
    "fifo": ("<fifo>", ("named pipe",)),
    "dangling-symlink": ("<symlink:gone.log>", ("symbolic link",)),
    "nul-bytes": (b"#  nccl-tests\x00\x00\x00 binary", ("nul byte",)),
    "utf16": ("# nThread 1\n".encode("utf-16"), ("utf-16",)),
    "elf-binary": (b"\x7fELF\x02\x01\x01" + b"\x00" * 64, ("nul byte",)),
}
for _name, (_content, _has) in {**_RAW, "huge": ("<sparse:300000000>", ("256.0 MiB limit",))}.items():
    CASES.append(Case(id=f"files/calibrate-log-{_name}", argv=["calibrate", "bad.log", "--out", "out.yaml"],
                      files={"bad.log/" if _content is None else "bad.log": "" if _content is None else _content},
                      stderr_has=_has, timeout_s=60.0))
for _name, (_path, _has) in _SYSTEM.items():
    CASES.append(Case(id=f"files/calibrate-log-{_name}", argv=["calibrate", _path, "--out", "out.yaml"],
                      stderr_has=_has, check=_no_environment))
for _name, (_content, _has) in {**_RAW, "latin1": (b"row_id,source_id\n1,caf\xe9\n", ("not utf-8",)),
                                "huge": ("<sparse:17000000>", ("16.0 MiB limit",))}.items():
    CASES.append(Case(id=f"files/validate-dataset-{_name}", argv=["validate", "bad.csv"],
                      files={"bad.csv/" if _content is None else "bad.csv": "" if _content is None else _content},
                      stderr_has=_has, timeout_s=60.0))
for _name, (_path, _has) in _SYSTEM.items():
    CASES.append(Case(id=f"files/validate-dataset-{_name}", argv=["validate", _path], stderr_has=_has,
                      check=_no_environment))
_COLUMNS = ("row_id,source_id,model_name,num_layers,hidden_size,num_attention_heads,seq_length,hardware_id,num_gpus,"
            "tp,pp,global_batch_size,precision,flops_counting,confidence")
CASES += [
    Case(id="files/validate-dataset-header-only", argv=["validate", "d.csv"], files={"d.csv": _COLUMNS + "\n"},
         stderr_has=["header but no rows"]),
    Case(id="files/validate-dataset-empty", argv=["validate", "d.csv"], files={"d.csv": ""},
         stderr_has=["lacks columns"]),
    Case(id="files/validate-dataset-not-csv", argv=["validate", "d.csv"], files={"d.csv": '"a,b\n'},
         stderr_has=["lacks columns"]),
    Case(id="files/validate-dataset-field-over-csv-limit", argv=["validate", "d.csv"],
         files={"d.csv": _COLUMNS + "\n" + "1," + "x" * 200_000 + "\n"}, stderr_has=["not a readable csv"]),
]

# --- a missing path, a path through a file ----------------------------------------------------------------------

CASES += [
    Case(id="files/estimate-missing", argv=["estimate", "nope.yaml"], stderr_has=["nope.yaml", "does not exist"]),
    Case(id="files/estimate-path-through-a-file", argv=["estimate", "f/s.yaml"], files={"f": "x"},
         stderr_has=["not a directory"]),
    Case(id="files/plan-model-missing-json", argv=["plan", "--model", "gone/config.json", "--cluster", "dgx-h100",
                                                   "--gpus", "8"], stderr_has=["does not exist"]),
    Case(id="files/topo-prices-missing", argv=["topo", "fat-tree", "--gpus", "64", "--radix", "16", "--prices",
                                               "nope.yaml"], stderr_has=["price file", "does not exist"]),
    Case(id="files/estimate-long-value-cut", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(plan="{tp: " + "9" * 5000 + ", global_batch_size: 8, seq_length: 2048}")},
         stderr_has=["cannot be read", "digits"]),
    Case(id="files/estimate-long-number", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(plan="{tp: " + "9" * 1000 + ", global_batch_size: 8, seq_length: 2048}")},
         stderr_has=["tp=", "...", "out of range", "1,048,576"]),
    Case(id="files/estimate-long-key-cut", argv=["estimate", "s.yaml"],
         files={"s.yaml": GOOD_SCENARIO + "k" * 1000 + ": 1\n"}, stderr_has=["unknown key", "..."]),
    Case(id="files/estimate-bad-date", argv=["estimate", "s.yaml"],
         files={"s.yaml": GOOD_SCENARIO + "name: 2024-13-45\n"}, stderr_has=["cannot be read", "month"]),
    Case(id="files/hf-number-5000-digits", argv=["plan", "--model", "config.json", "--cluster", "dgx-h100", "--gpus",
                                                 "8"],
         files={"config.json": '{"architectures": ["LlamaForCausalLM"], "hidden_size": ' + "9" * 5000 + "}"},
         stderr_has=["cannot be read"]),
]

# --- names longer than the file system allows (ENAMETOOLONG): one line, the name cut ------------------------------

_LONG = "x" * 5000
CASES += [
    Case(id="files/long-name-estimate", argv=["estimate", _LONG + ".yaml"], stderr_has=["file name too long", "..."]),
    Case(id="files/long-name-scenario-model", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(model=_LONG + ".yaml")}, stderr_has=["file name too long"]),
    Case(id="files/long-name-scenario-cluster", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(cluster="a/" * 3000 + "c.yaml")}, stderr_has=["file name too long"]),
    Case(id="files/long-name-plan-model", argv=["plan", "--model", _LONG + ".json", "--cluster", "dgx-h100", "--gpus",
                                                "8"], stderr_has=["file name too long"]),
    Case(id="files/long-name-calibrate-cluster", argv=["calibrate", "good.log", "--cluster", _LONG, "--out", "o.yaml"],
         files={"good.log": GOOD_LOG}, stderr_has=["unknown cluster", "..."]),
    Case(id="files/long-name-calibrate-log", argv=["calibrate", _LONG + ".log", "--out", "o.yaml"],
         stderr_has=["file name too long"]),
    Case(id="files/long-name-prices", argv=["topo", "fat-tree", "--gpus", "64", "--radix", "16", "--prices",
                                            _LONG + ".yaml"], stderr_has=["file name too long"]),
    Case(id="files/long-name-dataset", argv=["validate", _LONG + ".csv"], stderr_has=["file name too long"]),
]

# --- YAML features a spec has no use for ---------------------------------------------------------------------

CASES += [
    Case(id="files/yaml-python-tag", argv=["estimate", "s.yaml"],
         files={"s.yaml": "model: !!python/object/apply:os.system ['touch pwned']\n"},
         stderr_has=["malformed yaml", "python/object"]),
    Case(id="files/yaml-unknown-tag", argv=["estimate", "s.yaml"], files={"s.yaml": "model: !vault abc\n"},
         stderr_has=["malformed yaml", "!vault"]),
    Case(id="files/yaml-two-documents", argv=["estimate", "s.yaml"], files={"s.yaml": GOOD_SCENARIO + "---\na: 1\n"},
         stderr_has=["malformed yaml", "another document"]),
    Case(id="files/yaml-binary-model", argv=["estimate", "s.yaml"],
         files={"s.yaml": GOOD_SCENARIO.replace("model: llama3.1-8b", "model: !!binary aGVsbG8=")},
         stderr_has=["model must be"]),
    Case(id="files/yaml-nul-in-model-path", argv=["estimate", "s.yaml"],
         files={"s.yaml": GOOD_SCENARIO.replace("model: llama3.1-8b", 'model: "m\\0.yaml"')},
         stderr_has=["nul character"]),
    Case(id="files/yaml-nul-in-cluster-path", argv=["estimate", "s.yaml"],
         files={"s.yaml": GOOD_SCENARIO.replace("cluster: dgx-h100", 'cluster: "c/\\0"')},
         stderr_has=["nul character"]),
    Case(id="files/yaml-set-plan", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(plan="!!set {tp, pp}")}, stderr_has=["plan", "mapping"]),
    Case(id="files/yaml-merge-key", argv=["estimate", "s.yaml"],
         files={"s.yaml": "base: &b {tp: 8, global_batch_size: 8, seq_length: 2048}\nmodel: llama3.1-8b\n"
                          "cluster: dgx-h100\nnum_gpus: 8\nplan: {<<: *b}\n"}, stderr_has=["aliases"]),
    Case(id="files/yaml-recursive-alias", argv=["estimate", "s.yaml"], files={"s.yaml": "model: &m [*m]\n"},
         stderr_has=["aliases"]),
    Case(id="files/yaml-bom-accepted", argv=["estimate", "--json", "s.yaml"],
         files={"s.yaml": b"\xef\xbb\xbf" + GOOD_SCENARIO.encode()}, exit_code=0, max_lines=0),
    Case(id="files/yaml-crlf-accepted", argv=["estimate", "--json", "s.yaml"],
         files={"s.yaml": GOOD_SCENARIO.replace("\n", "\r\n").encode()}, exit_code=0, max_lines=0),
]

# --- a batch: the good files keep their results -----------------------------------------------------------------


def _batch_check(good: int, bad: int):
    def check(result: Result) -> None:
        docs = json.loads(result.stdout)["results"]
        assert isinstance(docs, list) and len(docs) == good + bad, docs
        assert sum("step_time_s" in d for d in docs) == good, docs
        assert sum("error" in d for d in docs) == bad, docs
        assert len([ln for ln in result.stderr.splitlines() if ln.strip()]) == bad, result.stderr
    return check


CASES += [
    Case(id="files/batch-good-and-binary", argv=["estimate", "--json", "good.yaml", "bad.yaml"],
         files={"good.yaml": GOOD_SCENARIO, "bad.yaml": b"\xff\xfe\x00\x00"}, stdout_ok=True,
         stderr_has=["bad.yaml", "utf-16"], check=_batch_check(1, 1)),
    Case(id="files/batch-good-and-directory", argv=["estimate", "--json", "bad.yaml", "good.yaml"],
         files={"good.yaml": GOOD_SCENARIO, "bad.yaml/": ""}, stdout_ok=True, stderr_has=["directory"],
         check=_batch_check(1, 1)),
    Case(id="files/batch-good-fifo-bomb", argv=["estimate", "--json", "good.yaml", "p.yaml", "b.yaml"],
         files={"good.yaml": GOOD_SCENARIO, "p.yaml": "<fifo>", "b.yaml": _BOMB}, stdout_ok=True,
         stderr_has=["named pipe", "aliases"], check=_batch_check(1, 2)),
    Case(id="files/batch-good-and-duplicate", argv=["estimate", "--json", "good.yaml", "dup.yaml", "good.yaml"],
         files={"good.yaml": GOOD_SCENARIO, "dup.yaml": GOOD_SCENARIO + "num_gpus: 16\n"}, stdout_ok=True,
         stderr_has=["duplicate key 'num_gpus'"], check=_batch_check(2, 1)),
    Case(id="files/batch-good-and-dev-zero", argv=["estimate", "good.yaml", "/dev/zero"],
         files={"good.yaml": GOOD_SCENARIO}, stdout_ok=True, stderr_has=["character device"],
         check=lambda r: ("step time" in r.stdout) or (_ for _ in ()).throw(AssertionError(r.stdout[-500:]))),
]

# --- Hugging Face config.json: mistyped and impossible fields ---------------------------------------------------


def _hf(**changes) -> str:
    return json.dumps({**HF_LLAMA, **changes})


_HF_CASES = {
    "heads-zero": (_hf(num_attention_heads=0), ["num_attention_heads=0", "positive integer"]),
    "heads-negative": (_hf(num_attention_heads=-8), ["num_attention_heads=-8"]),
    "kv-heads-zero": (_hf(num_key_value_heads=0), ["num_key_value_heads=0"]),
    "layers-string": (_hf(num_hidden_layers="32"), ["num_hidden_layers='32'"]),
    "hidden-float": (_hf(hidden_size=4096.5), ["hidden_size=4096.5"]),
    "hidden-bool": (_hf(hidden_size=True), ["hidden_size=true"]),
    "vocab-huge": (_hf(vocab_size=10**15), ["vocab_size=", "at most"]),
    "intermediate-list": (_hf(intermediate_size=[14336]), ["intermediate_size=[14336]"]),
    "intermediate-null": (_hf(intermediate_size=None), ["intermediate_size=none"]),
    "tie-string": (_hf(tie_word_embeddings="false"), ["tie_word_embeddings='false'", "true or false"]),
    "tie-number": (_hf(tie_word_embeddings=0), ["tie_word_embeddings=0"]),
    "head-dim-zero": (_hf(head_dim=0), ["head_dim=0"]),
    "sliding-window-string": (_hf(sliding_window="4k"), ["sliding_window='4k'"]),
    "layer-types-string": (_hf(layer_types="full_attention"), ["layer_types="]),
    "architectures-mapping": (_hf(architectures={"a": 1}), ["architectures="]),
    "model-type-number": (json.dumps({"model_type": 7}), ["model_type=7"]),
    "unknown-architecture": (json.dumps({"architectures": ["BertForMaskedLM"]}), ["bertformaskedlm", "supported"]),
    "missing-layers": (json.dumps({k: v for k, v in HF_LLAMA.items() if k != "num_hidden_layers"}),
                       ["num_hidden_layers"]),
    "mpt-attn-config-list": (json.dumps({"architectures": ["MptForCausalLM"], "d_model": 64, "n_heads": 4,
                                         "n_layers": 2, "vocab_size": 100, "attn_config": [1, 2]}),
                             ["attn_config=[1, 2]", "mapping"]),
    "mpt-ffn-config-string": (json.dumps({"architectures": ["MptForCausalLM"], "d_model": 64, "n_heads": 4,
                                          "n_layers": 2, "vocab_size": 100, "ffn_config": "big"}),
                              ["ffn_config='big'"]),
    "qwen-mlp-only-string": (json.dumps({"architectures": ["Qwen3MoeForCausalLM"], **{k: HF_LLAMA[k] for k in (
        "hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "vocab_size")},
        "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "mlp_only_layers": "0"}),
        ["mlp_only_layers='0'"]),
    "nan": ('{"architectures": ["LlamaForCausalLM"], "hidden_size": NaN}', ["nan", "finite"]),
    "duplicate-key": ('{"architectures": ["LlamaForCausalLM"], "hidden_size": 1, "hidden_size": 2}',
                      ["duplicate key 'hidden_size'"]),
    "syntax": ('{"architectures": ["LlamaForCausalLM"],\n "hidden_size": 4096,,\n}', ["line 2", "malformed json"]),
    "top-level-list": ("[1, 2, 3]", ["list"]),
    "deep-nesting": ("[" * 50000 + "]" * 50000, ["nests too deeply"]),
    "nul": (b'{"a": 1}\x00', ["nul byte"]),
}
for _name, (_text, _has) in _HF_CASES.items():
    _path = "hf/config.json"
    CASES.append(Case(id=f"files/hf-{_name}", argv=["plan", "--model", _path, "--cluster", "dgx-h100", "--gpus", "8"],
                      files={_path: _text}, stderr_has=[*_has, "config.json"]))
CASES.append(Case(id="files/hf-in-scenario-heads-zero", argv=["estimate", "s.yaml"],
                  files={"s.yaml": _scenario(model="hf/config.json"), "hf/config.json": _hf(num_attention_heads=0)},
                  stderr_has=["num_attention_heads=0"]))

# --- spec values that are not what their key holds (YAML) ---------------------------------------------------------

CASES += [
    Case(id="files/model-yaml-heads-zero", argv=["plan", "--model", "m.yaml", "--cluster", "dgx-h100", "--gpus", "8"],
         files={"m.yaml": "num_layers: 2\nhidden_size: 64\nffn_hidden_size: 256\nnum_attention_heads: 0\n"
                          "vocab_size: 100\ngated_mlp: false\n"}, stderr_has=["num_attention_heads=0"]),
    Case(id="files/model-yaml-moe-list", argv=["plan", "--model", "m.yaml", "--cluster", "dgx-h100", "--gpus", "8"],
         files={"m.yaml": "num_layers: 2\nhidden_size: 64\nffn_hidden_size: 256\nnum_attention_heads: 4\n"
                          "vocab_size: 100\ngated_mlp: false\nmoe: [8, 2]\n"}, stderr_has=["moe", "mapping"]),
    Case(id="files/model-yaml-gated-string", argv=["plan", "--model", "m.yaml", "--cluster", "dgx-h100", "--gpus",
                                                   "8"],
         files={"m.yaml": "num_layers: 2\nhidden_size: 64\nffn_hidden_size: 256\nnum_attention_heads: 4\n"
                          "vocab_size: 100\ngated_mlp: 'no'\n"}, stderr_has=["gated_mlp='no'", "true or false"]),
    Case(id="files/scenario-num-gpus-inf", argv=["estimate", "s.yaml"],
         files={"s.yaml": GOOD_SCENARIO.replace("num_gpus: 8", "num_gpus: .inf")}, stderr_has=["num_gpus=inf"]),
    Case(id="files/scenario-seq-nan", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(plan="{tp: 8, global_batch_size: 8, seq_length: .nan}")},
         stderr_has=["seq_length=nan"]),
    Case(id="files/scenario-plan-list", argv=["estimate", "s.yaml"], files={"s.yaml": _scenario(plan="[8, 1]")},
         stderr_has=["plan", "list"]),
    Case(id="files/scenario-huge-count", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(plan="{tp: 8, global_batch_size: 100000000000000000000, seq_length: 2048}")},
         stderr_has=["global_batch_size=", "out of range", "16,777,216"]),
    Case(id="files/cluster-yaml-power-string", argv=["tiers", "c.yaml"],
         files={"c.yaml": "base: dgx-h100\naccelerator: {base: h100-sxm, power_w: lots}\n"},
         stderr_has=["power_w='lots'"]),
    Case(id="files/cluster-yaml-fitted-regimes-string", argv=["tiers", "c.yaml"],
         files={"c.yaml": "base: dgx-h100\nfitted: {scale_up: {num_ranks: 8, regimes: abc}}\n"},
         stderr_has=["regimes", "list"]),
    Case(id="files/topo-file-gpus-string", argv=["topo", "t.yaml"], files={"t.yaml": "family: fat-tree\ngpus: many\n"},
         stderr_has=["gpus='many'"]),
    Case(id="files/topo-prices-entry-list", argv=["topo", "fat-tree", "--gpus", "64", "--radix", "16", "--prices",
                                                  "p.yaml"],
         files={"p.yaml": "switch_usd: [1, 2]\n"}, stderr_has=["switch_usd=[1, 2]"]),
    Case(id="files/topo-prices-value-string", argv=["topo", "fat-tree", "--gpus", "64", "--radix", "16", "--prices",
                                                    "p.yaml"],
         files={"p.yaml": "switch_usd: {value: cheap}\n"}, stderr_has=["switch_usd.value='cheap'"]),
]

# --- Megatron / NeMo long names in a scenario's plan ------------------------------------------------------------

_MEGATRON = ("{tensor_model_parallel_size: 8, pipeline_model_parallel_size: 1, context_parallel_size: 1, "
             "expert_model_parallel_size: 1, recompute_granularity: selective, global_batch_size: 8, "
             "seq_length: 2048}")
CASES += [
    Case(id="files/megatron-names-accepted", argv=["estimate", "--json", "s.yaml"],
         files={"s.yaml": _scenario(plan=_MEGATRON)}, exit_code=0, max_lines=0,
         check=lambda r: json.loads(r.stdout)["results"][0]["plan"]["recompute"] == "selective" or (
             _ for _ in ()).throw(AssertionError(r.stdout[:300]))),
    Case(id="files/megatron-vpp-from-layers-per-chunk", argv=["estimate", "--json", "s.yaml"],
         files={"s.yaml": "model: llama3.1-8b\ncluster: dgx-h100\nnum_gpus: 16\nplan: {tp: 8, "
                          "pipeline_model_parallel_size: 2, num_layers_per_virtual_pipeline_stage: 4, "
                          "global_batch_size: 16, seq_length: 2048}\n"}, exit_code=0, max_lines=0,
         check=lambda r: json.loads(r.stdout)["results"][0]["plan"]["vpp"] == 4 or (_ for _ in ()).throw(
             AssertionError(r.stdout[:300]))),
    Case(id="files/megatron-tp-conflict", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(plan="{tp: 8, tensor_model_parallel_size: 4, global_batch_size: 8, "
                                         "seq_length: 2048}")},
         stderr_has=["tp=8", "tensor_model_parallel_size=4", "disagree"]),
    Case(id="files/megatron-recompute-conflict", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(plan="{tp: 8, recompute: full, recompute_granularity: selective, "
                                         "global_batch_size: 8, seq_length: 2048}")},
         stderr_has=["recompute='full'", "recompute_granularity='selective'"]),
    Case(id="files/megatron-layers-per-chunk-not-dividing", argv=["estimate", "s.yaml"],
         files={"s.yaml": "model: llama3.1-8b\ncluster: dgx-h100\nnum_gpus: 16\nplan: {tp: 8, pp: 2, "
                          "num_layers_per_virtual_pipeline_stage: 5, global_batch_size: 16, seq_length: 2048}\n"},
         stderr_has=["num_layers_per_virtual_pipeline_stage=5", "num_layers=32", "pp=2"]),
    Case(id="files/megatron-vpp-conflict", argv=["estimate", "s.yaml"],
         files={"s.yaml": "model: llama3.1-8b\ncluster: dgx-h100\nnum_gpus: 16\nplan: {tp: 8, pp: 2, vpp: 2, "
                          "num_layers_per_virtual_pipeline_stage: 4, global_batch_size: 16, seq_length: 2048}\n"},
         stderr_has=["vpp=2", "disagree"]),
    Case(id="files/megatron-alias-bad-value", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(plan="{pipeline_model_parallel_size: two, global_batch_size: 8, "
                                         "seq_length: 2048}")},
         stderr_has=["pp='two'"]),
    Case(id="files/megatron-alias-typo", argv=["estimate", "s.yaml"],
         files={"s.yaml": _scenario(plan="{tensor_parallel_size: 8, global_batch_size: 8, seq_length: 2048}")},
         stderr_has=["tensor_parallel_size", "did you mean"]),
]
