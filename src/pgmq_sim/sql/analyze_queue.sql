analyze msg_queue
