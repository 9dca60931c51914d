"""Ed25519 keys and image signatures (ucx-ifunc-keygen, ucx-ifunc-cc --sign).

The cryptography is libsodium's, through PyNaCl (Debian: python3-nacl); the
target verifies with libsodium too (src/ucp/ifunc/load/trust.cc). Key files are
one line of text each, so that they can be read, copied and checked by eye:

    PREFIX.pub  "ucx-ifunc-ed25519-public <64 hex digits>"  (the public key)
    PREFIX.key  "ucx-ifunc-ed25519-secret <64 hex digits>"  (the seed; 0600)
"""

import os

from . import image_format as fmt
from .errors import UserError

PUBLIC_TAG = "ucx-ifunc-ed25519-public"
SECRET_TAG = "ucx-ifunc-ed25519-secret"


def _nacl():
    try:
        import nacl.signing
    except ImportError as err:
        raise UserError("signing needs PyNaCl (Debian package python3-nacl): "
                        "%s" % err)
    return nacl.signing


def _write(path, text, mode):
    """Creates path with mode from the start (never readable by others in
    between); refuses to overwrite a key."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise UserError("%s: exists; remove it first or choose another "
                        "prefix" % path)
    except OSError as err:
        raise UserError("%s: cannot create: %s" % (path, err.strerror))
    with os.fdopen(fd, "w") as stream:
        stream.write(text)


def generate(prefix):
    """Writes PREFIX.key (mode 0600) and PREFIX.pub; returns their paths."""
    signing = _nacl()
    key = signing.SigningKey.generate()
    secret_path, public_path = prefix + ".key", prefix + ".pub"
    _write(secret_path, "%s %s\n" % (SECRET_TAG, bytes(key).hex()), 0o600)
    _write(public_path, "%s %s\n" % (PUBLIC_TAG, bytes(key.verify_key).hex()),
           0o644)
    return secret_path, public_path


def _read_key_line(path, tag):
    try:
        with open(path) as stream:
            text = stream.read()
    except OSError as err:
        raise UserError("%s: cannot read: %s" % (path, err.strerror))
    fields = text.split()
    if len(fields) != 2 or fields[0] != tag or len(fields[1]) != 64:
        raise UserError("%s: not a %s file (expected one line '%s <64 hex "
                        "digits>', as ucx-ifunc-keygen writes)"
                        % (path, "secret key" if tag == SECRET_TAG
                           else "public key", tag))
    try:
        return bytes.fromhex(fields[1])
    except ValueError:
        raise UserError("%s: the key is not hexadecimal" % path)


def load_secret_key(path):
    """The signing key in PREFIX.key; refuses a file others may read."""
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise UserError("%s: cannot read: %s" % (path, err.strerror))
    if mode & 0o077:
        raise UserError("%s: readable by others (mode %03o); a secret key "
                        "must be mode 0600 (chmod 600 %s)"
                        % (path, mode & 0o777, path))
    return _nacl().SigningKey(_read_key_line(path, SECRET_TAG))


def load_public_key(path):
    return _read_key_line(path, PUBLIC_TAG)


def sign(name, blob, key):
    """blob (an image encoded with room for a signature) signed by key for
    ifunc name."""
    signature = key.sign(fmt.signed_part(name, blob)).signature
    return fmt.with_signature(blob, bytes(key.verify_key), signature)


def verify(name, blob, public_key):
    """Whether blob carries a valid signature by public_key."""
    image = fmt.decode(blob)
    if image.signature is None or image.signature.public_key != public_key:
        return False
    import nacl.exceptions
    try:
        _nacl().VerifyKey(public_key).verify(fmt.signed_part(name, blob),
                                             image.signature.signature)
    except nacl.exceptions.BadSignatureError:
        return False
    return True


KEYGEN_USAGE = """\
usage: ucx-ifunc-keygen PREFIX
       ucx-ifunc-keygen -h | --help | --version

Writes a new Ed25519 key pair for signing ifunc code images:
  PREFIX.key  the secret key (mode 0600): give it to ucx-ifunc-cc --sign
  PREFIX.pub  the public key: list it in UCX_IFUNC_TRUSTED_KEYS on targets
Existing files are never overwritten.

Options:
  -h, --help  print this help and exit
  --version   print the version and exit
"""


def keygen_main(argv, version):
    import sys
    if argv == ["--version"]:
        print("ucx-ifunc-keygen %s" % version)
        return 0
    if len(argv) != 1 or argv[0].startswith("-"):
        stream = sys.stdout if argv in (["-h"], ["--help"]) else sys.stderr
        stream.write(KEYGEN_USAGE)
        return 0 if stream is sys.stdout else 1
    try:
        secret_path, public_path = generate(argv[0])
    except UserError as err:
        for line in err.lines:
            print("ucx-ifunc-keygen: error: %s" % line, file=sys.stderr)
        return 1
    print("ucx-ifunc-keygen: wrote %s (secret, mode 0600) and %s"
          % (secret_path, public_path))
    return 0
