"""Serving over HTTPS: the certificate and key files `app.py --ssl-certfile/--ssl-keyfile` names, checked before serving.

Without TLS a class's passwords and session cookies cross the network in
clear text. uvicorn serves TLS itself from a certificate and its private key
(PEM files); a mistake in them would otherwise surface as an `ssl` traceback
after the app has been built. `check_tls` loads the pair the way the server
will (`ssl.SSLContext.load_cert_chain`) and says which file is wrong and how
to make a working pair.

Pure standard library.
"""

from __future__ import annotations

import os
import ssl

from workbench.errors import WorkbenchError

# How to make a pair for a class on a local network (docs/sharing.md: "Serving over HTTPS").
SELF_SIGNED_HINT = (
    "make a pair with `openssl req -x509 -newkey rsa:2048 -nodes -days 365 "
    "-keyout key.pem -out cert.pem -subj /CN=HOSTNAME`"
)


def check_tls(certfile: str | os.PathLike | None, keyfile: str | os.PathLike | None) -> bool:
    """True when both files are given and make a usable pair, False when neither is; else a WorkbenchError."""
    if not certfile and not keyfile:
        return False
    if not certfile or not keyfile:
        given, missing = ("--ssl-certfile", "--ssl-keyfile") if certfile else ("--ssl-keyfile", "--ssl-certfile")
        raise WorkbenchError(
            field=missing,
            rule=f"HTTPS needs the certificate and its private key; {given} was given without {missing}",
            fix=f"give both files, or neither to serve plain HTTP; {SELF_SIGNED_HINT}",
        )
    for field, path in (("--ssl-certfile", certfile), ("--ssl-keyfile", keyfile)):
        if not os.path.isfile(path) or not os.access(path, os.R_OK):
            raise WorkbenchError(
                field=field,
                rule=f"{os.fspath(path)!r} is not a file this account can read",
                fix=f"check the path and its permissions; {SELF_SIGNED_HINT}",
            )
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
    except (ssl.SSLError, ValueError) as exc:
        raise WorkbenchError(
            field="--ssl-certfile",
            rule=f"{os.fspath(certfile)!r} and {os.fspath(keyfile)!r} are not a PEM certificate "
            f"and its private key ({exc.__class__.__name__}: {str(exc)[:120]})",
            fix=f"give the certificate first and the key second, both PEM, the key without "
            f"a passphrase; {SELF_SIGNED_HINT}",
        ) from None
    return True
