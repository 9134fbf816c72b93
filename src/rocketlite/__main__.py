from rocketlite.cli.main import main

main()
