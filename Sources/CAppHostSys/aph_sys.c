#include "aph_sys.h"
int aph_placeholder(void) { return 0; }
