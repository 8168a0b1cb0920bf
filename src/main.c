#include "common/log.h"
int main(void) { mw_log_init(); mw_log_info("memwald placeholder"); return 0; }
