from pgmq_sim.launch import main

if __name__ == "__main__":  # not when a spawned process (the latency account's) imports it
    main()
