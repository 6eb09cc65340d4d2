"""The federation on disk: written atomically, opened without executing anything.

Layout of a run directory:
  federation.json   manifest: schema version, spec, dataset facts, wire schema, recording,
                    utility summary, versions, checksums of every other file, `complete`
  partition.pt      every client's train/test indices (the ground truth of membership)
  partition.json    groups, label maps, discarded count, partition statistics
  server.pt         the server's final state
  private.pt        every client's private state (never on the wire)
  metrics.json      each client's local test accuracy per evaluated round
  transcript/       the recorded wire (see transcript_io)
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from fedattack.atomic import replace_dir, staging_dir
from fedattack.data.types import ClientData, Partition
from fedattack.federation import trust
from fedattack.federation.claim import OutputClaim
from fedattack.federation.storage import checksums, load_tensors, read_json, save_tensors, verify, write_json
from fedattack.provenance import software
from fedattack.registry import UserError
from fedattack.rng import derive_seed

if TYPE_CHECKING:
    from fedattack.federation.spec import FederationSpec
    from fedattack.federation.transcript_io import TranscriptReader
    from fedattack.target import Target

SCHEMA_VERSION = 2  # 2: the wire schema gives each tensor's dtype besides its shape
# The seed a rebuilt method gets instead of the run's (`Federation.target`): a fixed number no
# run is trained with by chance (derived, not typed), so nothing holding the method holds the
# seed every random draw of the run, secure aggregation's pairwise masks included, derives from.
WITHHELD_SEED = derive_seed(0, "a rebuilt method: the run's seed withheld")
READABLE = (1, 2)
MANIFEST = "federation.json"


class RunWriter:
    """Writes into a hidden temporary sibling folder, renamed into place only when complete.

    The output is claimed first (`claim.OutputClaim`): one writer per folder, and `overwrite`
    replaces only a folder that is a fedattack run directory; the old run stays until the new
    one is in place.
    """

    def __init__(self, out: Path, overwrite: bool = False) -> None:
        self.out = Path(out)
        self.claim = OutputClaim(self.out, overwrite, "run directory", is_run_directory)
        try:
            self.tmp = staging_dir(self.out)
        except BaseException:
            self.claim.release()
            raise

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
        self.claim.release()

    def write_partition(self, partition: Partition) -> None:
        tensors = {}
        for k, c in enumerate(partition.clients):
            tensors[f"client{k}/train"] = torch.as_tensor(np.asarray(c.train, dtype=np.int64))
            tensors[f"client{k}/test"] = torch.as_tensor(np.asarray(c.test, dtype=np.int64))
        tensors["discarded"] = torch.as_tensor(np.asarray(partition.discarded, dtype=np.int64))
        save_tensors(self.tmp / "partition.pt", tensors)
        write_json(self.tmp / "partition.json", {"spec": partition.spec, "groups": partition.groups(),
                                                 "stats": partition.stats})

    def write_states(self, server: dict, private: list[dict]) -> None:
        save_tensors(self.tmp / "server.pt", server)
        flat = {f"client{k}/{n}": t for k, s in enumerate(private) for n, t in s.items()}
        save_tensors(self.tmp / "private.pt", flat)

    def finish(self, manifest: dict[str, Any]) -> Path:
        """Seal the manifest with checksums and move the folder into place."""
        manifest = {"schema_version": SCHEMA_VERSION, "versions": software(), **manifest, "complete": True,
                    "files": checksums(self.tmp)}
        write_json(self.tmp / MANIFEST, manifest)
        self.claim.confirm()
        return replace_dir(self.tmp, self.out)


def is_run_directory(path: Path) -> bool:
    """Whether `path` is a folder holding a fedattack run manifest (what --overwrite may replace)."""
    try:
        manifest = read_json(path / MANIFEST) if path.is_dir() and not path.is_symlink() else None
    except UserError:
        return False
    return isinstance(manifest, dict) and "schema_version" in manifest


class Federation:
    """A trained federation opened from disk (manifest checked, files verified)."""

    def __init__(self, path: str | Path, deep_verify: bool = True) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise UserError(f"{self.path} is not a directory; pass the folder `fedattack train` wrote")
        if self.path.name.startswith(".") and ".partial-" in self.path.name:
            raise UserError(f"{self.path} is an unfinished run (training was interrupted); train it again")
        self.manifest = read_json(self.path / MANIFEST, trust.MANIFEST_BYTES)
        if not isinstance(self.manifest, dict) or "schema_version" not in self.manifest:
            raise UserError(f"{self.path} is not a fedattack run directory (no schema version)")
        version = self.manifest["schema_version"]
        if not isinstance(version, int) or isinstance(version, bool):
            raise trust.refuse(self.path / MANIFEST, f"has the schema version {version!r}, which is not a number")
        if version not in READABLE:
            raise UserError(f"{self.path} has run-directory schema {version}, this fedattack reads "
                            f"{' and '.join(map(str, READABLE))}; re-train it with this version")
        if self.manifest.get("complete") is not True:
            raise UserError(f"{self.path} is incomplete (training did not finish); train it again")
        trust.check_manifest(self.path / MANIFEST, self.manifest)
        trust.check_tree(self.path, self.manifest["files"])
        verify(self.path, self.manifest["files"], deep=deep_verify)
        if deep_verify:  # the structural checks too, so a forged run is refused when opened
            self.partition()
            transcript = self.transcript()
            listed, recorded = len(transcript.index), self.manifest["recording"].get("messages")
            if isinstance(recorded, int) and recorded != listed:
                raise trust.refuse(self.path / "transcript" / "index.json",
                                   f"lists {listed} messages, the manifest recorded {recorded}")
            # every round, not only those an attack will read; a run that says it diverged has NaN
            # weights on purpose, and is never attacked (evaluate refuses it, or records why not)
            transcript.verify_all(finite=not self.diverged)
            trust.check_state(self.path / "server.pt", load_tensors(self.path / "server.pt"),
                              self.manifest["wire_schema"], finite=not self.diverged)

    @property
    def diverged(self) -> bool:
        return bool(self.manifest.get("diverged"))

    @property
    def spec(self) -> FederationSpec:
        from fedattack.federation.spec import FederationSpec
        try:
            return FederationSpec.from_json(self.manifest["spec"])
        except (TypeError, ValueError, AttributeError) as exc:
            raise trust.refuse(self.path / MANIFEST, f"has a spec this version cannot read ({exc})") from None

    def partition(self) -> Partition:
        where = self.path / "partition.pt"
        meta = read_json(self.path / "partition.json")
        tensors = load_tensors(where)
        groups = meta.get("groups") if isinstance(meta, dict) else None
        if not isinstance(groups, list) or len(groups) != self.num_clients:
            raise trust.refuse(self.path / "partition.json", f"does not describe {self.num_clients} clients")
        try:
            parts = [(tensors[f"client{k}/train"].numpy(), tensors[f"client{k}/test"].numpy())
                     for k in range(self.num_clients)]
            discarded = tensors["discarded"].numpy()
        except KeyError as exc:
            raise trust.refuse(where, f"has no {exc}") from None
        trust.check_partition(where, parts, discarded, int(self.manifest["dataset"]["train_size"]))
        clients = tuple(ClientData(tr, te, str(g)) for (tr, te), g in zip(parts, groups))
        return Partition(meta.get("spec", {}), clients, discarded, meta.get("stats", {}))

    def server_state(self) -> dict[str, torch.Tensor]:
        state = load_tensors(self.path / "server.pt")
        trust.check_state(self.path / "server.pt", state, self.manifest["wire_schema"])
        return state

    def check_dataset(self, dataset: Any) -> None:
        """Refuse, in one line, a dataset other than the one the manifest describes."""
        trust.check_dataset(self.path / MANIFEST, self.manifest, dataset)

    def private_state(self, client: int) -> dict[str, torch.Tensor]:
        self.check_client(client)
        prefix = f"client{client}/"
        return {k[len(prefix):]: v for k, v in load_tensors(self.path / "private.pt").items()
                if k.startswith(prefix)}

    def transcript(self) -> TranscriptReader:
        from fedattack.federation.transcript_io import TranscriptReader
        return TranscriptReader(self.path / "transcript", self.manifest["wire_schema"],
                                self.manifest["files"], self.num_clients)

    def metrics(self) -> dict[str, Any]:
        return read_json(self.path / "metrics.json")

    @property
    def num_clients(self) -> int:
        return int(self.manifest["num_clients"])

    def check_client(self, client: int) -> None:
        if not 0 <= client < self.num_clients:
            raise UserError(f"client {client} does not exist; this federation has clients 0..{self.num_clients - 1}")

    def target(self, data_root: str | Path | None = None) -> Target:
        """Rebuild the method (model template, hyperparameters, defences) from the manifest, as
        the public protocol describes it: with `WITHHELD_SEED` for the run's seed, so an
        adversary handed the method cannot regenerate what the run drew (its clients' noise,
        secure aggregation's masks)."""
        from fedattack.data.normalization import Normalization
        from fedattack.defences import make_target
        from fedattack.target import TargetContext
        spec = self.spec
        ds = self.manifest["dataset"]
        ctx = TargetContext(model=spec.model, input_shape=tuple(ds["input_shape"]),
                            num_classes=ds["num_classes"], recipe=spec.recipe,
                            num_clients=self.num_clients, rounds=spec.rounds, seed=WITHHELD_SEED,
                            clients_per_round=spec.clients_per_round(self.num_clients),
                            data_root=None if data_root is None else str(data_root),
                            normalization=Normalization.from_json(self.manifest.get("normalization")))
        return make_target(spec.method, spec.hyper, ctx, spec.defences)
