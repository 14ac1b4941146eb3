#ifndef APH_SYS_H
#define APH_SYS_H
int aph_placeholder(void);
#endif
