package keys

import "crypto"

const cryptoHash0 = crypto.Hash(0)
