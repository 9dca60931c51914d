"""Keys and signatures: ucx-ifunc-keygen's files, signing and its checks."""

import os
import stat
import subprocess
import unittest

from tests import helpers
from ucx_ifunc import image_format as fmt
from ucx_ifunc import signing
from ucx_ifunc.errors import UserError

from tests.test_image_format import sample_image


class KeyFileTest(unittest.TestCase):
    def setUp(self):
        self.work = helpers.scratch_dir("keys")
        self.prefix = os.path.join(self.work, "site")

    def test_keygen_writes_a_private_secret_and_a_public_key(self):
        secret, public = signing.generate(self.prefix)
        self.assertEqual(stat.S_IMODE(os.stat(secret).st_mode), 0o600)
        with open(public) as stream:
            tag, key = stream.read().split()
        self.assertEqual(tag, signing.PUBLIC_TAG)
        self.assertEqual(len(bytes.fromhex(key)), fmt.PUBLIC_KEY_SIZE)
        self.assertEqual(bytes(signing.load_secret_key(secret).verify_key),
                         signing.load_public_key(public))

    def test_keygen_never_overwrites(self):
        signing.generate(self.prefix)
        with self.assertRaisesRegex(UserError, "exists"):
            signing.generate(self.prefix)

    def test_a_secret_key_others_can_read_is_refused(self):
        secret, _ = signing.generate(self.prefix)
        os.chmod(secret, 0o644)
        with self.assertRaisesRegex(UserError, "mode 0600"):
            signing.load_secret_key(secret)

    def test_a_public_key_is_not_a_secret_key(self):
        _, public = signing.generate(self.prefix)
        os.chmod(public, 0o600)
        with self.assertRaisesRegex(UserError, "not a secret key file"):
            signing.load_secret_key(public)

    def test_keygen_command(self):
        # The launcher runs keygen when started under that name.
        keygen = os.path.join(self.work, "ucx-ifunc-keygen")
        os.symlink(helpers.LAUNCHER, keygen)
        out = subprocess.run([keygen, self.prefix], stdout=subprocess.PIPE,
                             universal_newlines=True, check=True).stdout
        self.assertIn("mode 0600", out)
        self.assertTrue(os.path.exists(self.prefix + ".pub"))
        again = subprocess.run([keygen, self.prefix], stderr=subprocess.PIPE,
                               universal_newlines=True)
        self.assertEqual(again.returncode, 1)
        self.assertIn("exists", again.stderr)
        version = subprocess.run([keygen, "--version"], stdout=subprocess.PIPE,
                                 universal_newlines=True, check=True).stdout
        self.assertEqual(version, "ucx-ifunc-keygen %s\n" % helpers.VERSION)


class SignatureTest(unittest.TestCase):
    def setUp(self):
        work = helpers.scratch_dir("signatures")
        self.keys = []
        for name in ("a", "b"):
            secret, _ = signing.generate(os.path.join(work, name))
            self.keys.append(signing.load_secret_key(secret))

    def signed(self, key, name="demo"):
        return signing.sign(name, fmt.encode(sample_image(), signed=True), key)

    def test_signature_verifies_and_round_trips(self):
        blob = self.signed(self.keys[0])
        public = bytes(self.keys[0].verify_key)
        self.assertTrue(signing.verify("demo", blob, public))
        image = fmt.decode(blob)
        self.assertEqual(image.signature.public_key, public)
        self.assertEqual(fmt.encode(image), blob)

    def test_another_key_another_name_or_a_changed_byte_fail(self):
        blob = self.signed(self.keys[0])
        public = bytes(self.keys[0].verify_key)
        self.assertFalse(signing.verify("demo", blob,
                                        bytes(self.keys[1].verify_key)))
        self.assertFalse(signing.verify("other", blob, public))
        tampered = bytearray(blob)
        tampered[fmt.DESC_SIZE] ^= 1  # first byte of the code
        self.assertFalse(signing.verify("demo", bytes(tampered), public))


class SignedBuildTest(unittest.TestCase):
    def test_sign_option_signs_the_embedded_image(self):
        work = helpers.scratch_dir("signed-build")
        secret, public = signing.generate(os.path.join(work, "site"))
        source = helpers.write_source(work, "signed.c", """\
            #include <stddef.h>
            void signed_main(void *p, size_t n, void *a) { *(int *)a = 7; }
            """)
        output = os.path.join(work, "signed.so")
        result = helpers.run_tool(["--sign", secret, "-o", output, source])
        self.assertEqual(result.returncode, 0, result.stderr)
        name, blob = helpers.elf_query.read_embedded_image(output)
        self.assertTrue(signing.verify(name, blob,
                                       signing.load_public_key(public)))
        dump = helpers.run_tool(["--dump", output]).stdout
        self.assertIn("signature: Ed25519, key " +
                      signing.load_public_key(public).hex(), dump)

    def test_a_missing_key_fails_before_building(self):
        work = helpers.scratch_dir("signed-build")
        source = helpers.write_source(work, "nokey.c", """\
            #include <stddef.h>
            void nokey_main(void *p, size_t n, void *a) {}
            """)
        result = helpers.run_tool(["--sign", os.path.join(work, "none.key"),
                                   "-o", os.path.join(work, "nokey.so"),
                                   source])
        self.assertEqual(result.returncode, 1)
        self.assertIn("none.key: cannot read", result.stderr)
        self.assertFalse(os.path.exists(os.path.join(work, "nokey.so")))


if __name__ == "__main__":
    unittest.main()
