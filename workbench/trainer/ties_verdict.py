"""What a run does about the private library ties (workbench/library_compat.py): the verdict of the registry's
check for one run's config, before its model loads.

A broken tie the run needs refuses it, naming the tie; a broken tie it can do without, or a library installed at
another version than the ties were written for, is said once in its log and in status.json's `library_ties`.
The registry holds the ties and their checks; this module only reads it (as `python -m workbench ties` does).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

from workbench import library_compat


def installed_version(library: str) -> str | None:
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return None


def version_notes() -> list[str]:
    """One line per library installed at another version than the ties were written for."""
    notes = []
    for library, wanted in library_compat.WRITTEN_FOR.items():
        found = installed_version(library)
        if found is not None and found.split("+")[0] != wanted:
            notes.append(f"{library} {found} is installed; the private ties were written for {wanted}")
    return notes


@dataclass(frozen=True)
class Verdict:
    """The check's answer for one run: what no longer holds, which of it the run needs, the versions that differ."""

    problems: dict[str, str]
    versions: list[str]
    refused: tuple[str, ...]  # the labels of the broken ties the run needs

    def record(self) -> dict | None:
        """status.json's `library_ties`; None when every tie holds on the versions written for."""
        if not (self.problems or self.versions):
            return None
        return {"problems": self.problems, "versions": self.versions, "refused": list(self.refused)}

    def warning(self) -> str | None:
        """One line naming each version that differs and each tie that no longer holds; None when neither."""
        if not (self.problems or self.versions):
            return None
        ties = "; ".join(
            f"{label}: {problem} (without it: {library_compat.BY_LABEL[label].without})"
            for label, problem in self.problems.items()
        )
        return (
            "; ".join(self.versions)
            + (". " if self.versions else "")
            + (f"Ties that no longer hold: {ties}." if ties else "Every private tie still holds.")
            + " The registry: workbench/library_compat.py, `python -m workbench ties`"
        )

    def refusal(self) -> str | None:
        """The message refusing the run, naming each broken tie it needs; None when it may go on."""
        if not self.refused:
            return None
        pins = ", ".join(f"{library}=={version}" for library, version in library_compat.WRITTEN_FOR.items())
        return (
            "the installed libraries break what this run relies on: "
            + "; ".join(
                f"{label}: {self.problems[label]} (needed by {library_compat.BY_LABEL[label].needed_when}: without it "
                f"{library_compat.BY_LABEL[label].without})"
                for label in self.refused
            )
            + f". Install the versions written for ({pins}: make setup)"
        )


def verdict(cfg=None, problems: dict[str, str] | None = None) -> Verdict:
    """The check for the run of `cfg` (None: what every run needs); `problems`: check()'s, when already made."""
    problems = library_compat.check() if problems is None else problems
    refused = tuple(label for label in problems if library_compat.BY_LABEL[label].needed_by(cfg))
    return Verdict(problems, version_notes(), refused)
