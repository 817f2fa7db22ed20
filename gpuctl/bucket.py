"""`gpuctl bucket add|list|rm|ls` in -w WORKSPACE (else the caller's only workspace), over
`/api/v1/workspaces/{slug}/buckets/`. A bucket's credentials are two of the workspace's secrets, named with
--access-key-secret and --secret-key-secret (set them first with `gpuctl secret set`); `ls` lists the objects
under its prefix as the platform reads them."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from gpuctl.errors import EXIT_OK
from gpuctl.inputs import chosen_workspace


def _url(workspace: str, name: str = "") -> str:
    return f"/api/v1/workspaces/{workspace}/buckets/" + (f"{name}/" if name else "")


def _missing(workspace: str, name: str = "") -> str:
    return f"no bucket {name} in {workspace}" if name else f"no such workspace: {workspace}"


def cmd_bucket_add(run) -> int:
    args, workspace = run.args, chosen_workspace(run)
    body = {"name": args.name, "endpoint": args.endpoint, "bucket": args.bucket, "prefix": args.prefix,
            "credentials": {"accessKeyId": {"secret": args.access_key_secret},
                            "secretAccessKey": {"secret": args.secret_key_secret}}}
    if args.region:
        body["region"] = args.region
    row = run.api.call("POST", _url(workspace), body=body, not_found=_missing(workspace))
    if run.structured:
        run.emit(row)
    else:
        run.print(run.say("bucket {name} in {workspace}: added ({endpoint}/{bucket}/{prefix})", name=row["name"],
                          workspace=workspace, endpoint=row["endpoint"], bucket=row["bucket"],
                          prefix=row["prefix"]))
    return EXIT_OK


def cmd_bucket_list(run) -> int:
    workspace = chosen_workspace(run)
    rows = run.api.call("GET", _url(workspace), not_found=_missing(workspace))
    table = [[r["name"], r["endpoint"], r["bucket"], r["prefix"] or "-",
              f"{r['credentials']['accessKeyId']['secret']}, {r['credentials']['secretAccessKey']['secret']}"]
             for r in rows]
    run.listing(rows, table, ["NAME", "ENDPOINT", "BUCKET", "PREFIX", "SECRETS"],
                empty=run.say("no buckets in {workspace}", workspace=workspace))
    return EXIT_OK


def cmd_bucket_rm(run) -> int:
    workspace = chosen_workspace(run)
    run.api.call("DELETE", _url(workspace, run.args.name), not_found=_missing(workspace, run.args.name))
    if not run.structured:
        run.print(run.say("bucket {name} in {workspace}: deleted", name=run.args.name, workspace=workspace))
    return EXIT_OK


def cmd_bucket_ls(run) -> int:
    workspace = chosen_workspace(run)
    objects = run.api.call("GET", _url(workspace, run.args.name) + "objects/", params={"prefix": run.args.prefix},
                           not_found=_missing(workspace, run.args.name))
    run.listing(objects, [[o["key"], o["size"], o["last_modified"]] for o in objects], ["KEY", "BYTES", "MODIFIED"],
                empty=run.say("no objects in bucket {name}", name=run.args.name), right=(1,))
    return EXIT_OK


def add_bucket_commands(commands, command: Callable[..., argparse.ArgumentParser],
                        add_output: Callable[..., Any]) -> None:
    """`bucket` with its actions, registered on gpuctl's command parser."""
    bucket = command(commands, "bucket", None, "register, list, delete my workspace's S3-compatible buckets")
    actions = bucket.add_subparsers(dest="bucket_command", required=True, metavar="ACTION",
                                    parser_class=commands._parser_class)
    add = command(actions, "add", cmd_bucket_add, "register a bucket (owners); its credentials are two secrets")
    add.add_argument("name", metavar="NAME", help="what a spec's buckets names, e.g. raw-data")
    add.add_argument("--endpoint", required=True, metavar="URL", help="the store, e.g. https://s3.example.com")
    add.add_argument("--bucket", required=True, metavar="BUCKET", help="the bucket's name in the store")
    add.add_argument("--prefix", default="", metavar="PREFIX", help="the key prefix the workspace uses")
    add.add_argument("--region", metavar="REGION", help="default us-east-1")
    add.add_argument("--access-key-secret", required=True, metavar="SECRET",
                     help="the workspace's secret holding the access key id")
    add.add_argument("--secret-key-secret", required=True, metavar="SECRET",
                     help="the workspace's secret holding the secret access key")
    add_output(add)
    listing = command(actions, "list", cmd_bucket_list, "the workspace's buckets")
    add_output(listing, headers=True)
    remove = command(actions, "rm", cmd_bucket_rm, "delete a bucket (refused while a live job reads it)")
    remove.add_argument("name", metavar="NAME")
    objects = command(actions, "ls", cmd_bucket_ls, "the objects under a bucket's prefix")
    objects.add_argument("name", metavar="NAME")
    objects.add_argument("--prefix", default="", metavar="PREFIX", help="within the bucket's own prefix")
    add_output(objects, headers=True)
