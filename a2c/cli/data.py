"""`a2c data`: fetch the external data sets that some paper tasks need, into the cache.

    a2c data list                              the fetchable data sets and where they are
    a2c data fetch alfworld [--dest DIR] [--mirror URL] [--force]

The registry, the checksummed download and the safe unpacking live in `a2c.runtime.data.fetch`.
`--mirror URL` (or `$A2C_DATA_MIRROR`) fetches the archives by file name from another base URL
(`http://...` or `file:///...`); the checksums still apply. Tests use it with a loopback server.
The default destination is `a2c.paths.cache_dir()/data/<name>`.
"""

from __future__ import annotations

import sys

from a2c.runtime.data.fetch import DATASETS, dataset_path, fetch


def _cmd_fetch(args) -> int:
    fetch(args.name, args.dest, mirror=args.mirror, force=args.force,
          say=lambda m: print(m, file=sys.stderr))
    return 0


def _cmd_list(args) -> int:
    for name in sorted(DATASETS):
        ds = DATASETS[name]
        where = dataset_path(name)
        print(f"{name:12s} {'fetched: ' + str(where) if where else 'not fetched'}")
        print(f"{'':12s} {ds.description}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("data", help="fetch external data sets into the cache",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    f = sub.add_parser("fetch", help="download and unpack a data set (checksummed, atomic)")
    f.add_argument("name", help=f"data set ({', '.join(sorted(DATASETS))})")
    f.add_argument("--dest", help="folder to create (default: the cache, data/<name>)")
    f.add_argument("--mirror", help="base URL to fetch the archives from by file name "
                                    "(default $A2C_DATA_MIRROR or the upstream URLs)")
    f.add_argument("--force", action="store_true", help="fetch again and replace the folder")
    f.set_defaults(handler=_cmd_fetch)
    ls = sub.add_parser("list", help="the fetchable data sets and whether they are here")
    ls.set_defaults(handler=_cmd_list)
    c = sub.add_parser("corpus", help="build a frozen search corpus from the web, once "
                                      "(DeepSearchQA: SearxNG results, fetched pages, manifest)")
    c.add_argument("task", choices=["deepsearchqa"], help="the task whose corpus to build")
    from a2c.runtime.envs.deepsearchqa import corpus as deepsearchqa_corpus
    deepsearchqa_corpus.add_arguments(c)
    c.set_defaults(handler=lambda args: (deepsearchqa_corpus.run_cli(args), 0)[1])
    p.set_defaults(handler=lambda args: (p.print_help(), 2)[1])
