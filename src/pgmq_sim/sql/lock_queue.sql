lock table msg_queue in access exclusive mode
