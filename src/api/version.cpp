// The one symbol libingot.so defines itself; the rest of the API comes whole
// from the api module.
#include "ingot/model.h"

namespace ingot {
const char* version() { return INGOT_VERSION; }
}  // namespace ingot
