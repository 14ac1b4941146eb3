// FreeType for the Snapshots target (headers from libfreetype-dev, found by pkg-config freetype2).
#ifndef APH_CFREETYPE_SHIM_H
#define APH_CFREETYPE_SHIM_H

#include <ft2build.h>
#include FT_FREETYPE_H

/// FT_LOAD_RENDER is a shifted macro that does not import into Swift.
static const FT_Int32 aph_ft_load_render = FT_LOAD_RENDER;

#endif
