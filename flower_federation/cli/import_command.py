"""`python -m flower_federation import helm|operator ...`: read the source, import it, print the
stack file (or write one per stack with --output-dir). Refusals go to stderr, every one at
once, with exit code 1 and nothing on stdout; a missing or unreadable file is exit code 2."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from flower_federation.cli.stack_file import yaml_error
from flower_federation.kube.goyaml import load_helm_values

if TYPE_CHECKING:
    from flower_federation.importers.common import Stack

# importers/ is imported by `import` alone, inside its functions: every command builds this parser, and `render`
# (issue 36: its own cost within 1.2x of the Pulumi SDK's) uses none of it.


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "import",
        help="print a stack settings file equivalent to a SuperNode Helm chart install or flower-operator Federations",
    )
    kinds = p.add_subparsers(dest="source", required=True)
    helm = kinds.add_parser("helm", help="a values file of Flower's SuperNode Helm chart, as a site stack")
    helm.add_argument("file", metavar="VALUES.yaml")
    helm.add_argument(
        "--release", metavar="NAME", help="the release name of `helm install NAME` (default: the chart's name)"
    )
    helm.add_argument("--namespace", metavar="NS", help="the namespace of `helm install -n NS` (default: default)")
    operator = kinds.add_parser("operator", help="flower-operator Federation CRs (one or several documents)")
    operator.add_argument("file", metavar="CR.yaml")
    for q in (helm, operator):
        q.add_argument(
            "--allow-drop", action="store_true", help="leave out values without a counterpart, listed in a comment"
        )
        q.add_argument(
            "--preserve-behaviour",
            action="store_true",
            help="where our defaults differ from the source's, set the source's behaviour explicitly",
        )
        q.add_argument("--output-dir", metavar="DIR", help="write Pulumi.<stack>.yaml there instead of printing")
        q.set_defaults(fn=cmd_import)


def _command(args: argparse.Namespace) -> str:
    # The file by its name: the stack file is shared, the importer's disk is not.
    words = ["python", "-m", "flower_federation", "import", args.source, Path(args.file).name]
    for flag, value in (
        ("--release", getattr(args, "release", None)),
        ("--namespace", getattr(args, "namespace", None)),
    ):
        if value:
            words += [flag, value]
    words += [
        f for f, on in (("--allow-drop", args.allow_drop), ("--preserve-behaviour", args.preserve_behaviour)) if on
    ]
    return shlex.join(words)


def _documents(path: str) -> list[Any]:
    """The file's documents as Helm (a values file) or kubectl (a CR) reads them: go-yaml v2, where `1e-3` is a
    float and `y` a boolean, which PyYAML reads otherwise."""
    return load_helm_values(Path(path).read_text(encoding="utf-8"))


def cmd_import(args: argparse.Namespace) -> int:
    from flower_federation.importers import helm, operator
    from flower_federation.importers.common import ImportRefused

    try:
        documents = _documents(args.file)
    except (OSError, UnicodeDecodeError) as err:
        print(f"error: cannot read {args.file}: {err}", file=sys.stderr)
        return 2
    except yaml.YAMLError as err:
        print(f"error: {yaml_error(args.file, err)}", file=sys.stderr)
        return 2
    command = _command(args)
    try:
        if args.source == "helm":
            if len(documents) > 1:
                print(
                    f"error: {args.file}: a values file is one YAML document, found {len(documents)}", file=sys.stderr
                )
                return 2
            origin = f"the SuperNode Helm chart's values in {Path(args.file).name}"
            stacks = [
                helm.import_values(
                    documents[0] if documents else None,
                    origin=origin,
                    command=command,
                    release=args.release,
                    namespace=args.namespace,
                    allow_drop=args.allow_drop,
                    preserve=args.preserve_behaviour,
                )
            ]
        else:
            stacks = operator.import_documents(
                documents,
                source=Path(args.file).name,
                command=command,
                allow_drop=args.allow_drop,
                preserve=args.preserve_behaviour,
            )
    except ImportRefused as err:
        print(err, file=sys.stderr)
        return 1
    if not stacks:
        print(f"error: {args.file} holds no Federation", file=sys.stderr)
        return 2
    return _emit(stacks, args.output_dir)


def _emit(stacks: list[Stack], output_dir: str | None) -> int:
    from flower_federation.importers.output import stack_file, stack_files

    names = [s.stack for s in stacks]
    if len(set(names)) != len(names):
        print(f"error: two stacks would be named alike: {', '.join(sorted(names))}", file=sys.stderr)
        return 2
    if output_dir is None:
        sys.stdout.write(stack_files(stacks))
        return 0
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    for s in stacks:
        path = Path(output_dir) / f"Pulumi.{s.stack}.yaml"
        path.write_text(stack_file(s), encoding="utf-8")
        print(f"wrote {path}")
    return 0
